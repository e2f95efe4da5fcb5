package main

import (
	"bytes"
	"path/filepath"
	"testing"
)

// Every example under configs/examples passes mcpgw validate with only
// MCPGW_LISTEN set (their other variables have defaults).
func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "configs", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples (%v)", err)
	}
	t.Setenv("MCPGW_LISTEN", "127.0.0.1:8080")
	for _, f := range files {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"validate", "--config", f}, &stdout, &stderr); code != 0 {
			t.Errorf("mcpgw validate %s: exit %d\n%s%s", f, code, stdout.String(), stderr.String())
		}
	}
}
