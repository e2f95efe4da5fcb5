package config_test

import (
	"path/filepath"
	"testing"
)

// What /status/config shows is a config validate accepts: no url: ""
// beside a command, no zero that validation then refuses. Each good file
// and the shipped configs go through Load, ShowYAML and Parse again.
func TestShowYAMLValidates(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yaml")
	files = append(files, "../../configs/example.yaml", "../../configs/default.yaml")
	env := envOf(map[string]string{"SET_VAR": "v1", "TOKEN": "t0k3n", "GITHUB_TOKEN": "ghp_test", "MCPGW_EXECUTABLE": "/opt/mcpgw"})
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := loadAll(file, env)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			shown, err := c.ShowYAML()
			if err != nil {
				t.Fatal(err)
			}
			again, err := parseAll("shown.yaml", shown, nil)
			if err != nil {
				t.Fatalf("the shown config does not validate:\n%v\n--- shown:\n%s", err, shown)
			}
			// Leaving out the empty members loses nothing: shown again,
			// the config is the same.
			if twice, err := again.ShowYAML(); err != nil || string(twice) != string(shown) {
				t.Errorf("shown twice differs (%v):\n%s\n--- first:\n%s", err, twice, shown)
			}
		})
	}
}

// An explicit empty list is kept in the shown config: audit.redact_fields:
// [] (redact nothing) must not come back as the default list.
func TestShowYAMLKeepsExplicitEmptyList(t *testing.T) {
	c, err := parseAll("c.yaml", []byte("upstreams: {a: {command: [x]}}\naudit: {output: stdout, redact_fields: []}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	shown, err := c.ShowYAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := parseAll("shown.yaml", shown, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(again.Audit.RedactFields); n != 0 {
		t.Errorf("redact_fields shown and read again has %d fields, want none:\n%s", n, shown)
	}
}
