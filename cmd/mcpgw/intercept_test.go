package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mcpgw intercept test shows what each interceptor of the example config
// would do, prints the member as it would go on, and calls no external
// service.
func TestInterceptTest(t *testing.T) {
	t.Setenv("MCPGW_LISTEN", "127.0.0.1:8080")
	t.Setenv("MCPGW_HOOK_URL", "http://127.0.0.1:1/never-called")
	cfg := filepath.Join("..", "..", "configs", "examples", "interceptors.yaml")
	dir := t.TempDir()
	result := filepath.Join(dir, "result.json")
	if err := os.WriteFile(result, []byte(`{"content":[{"type":"text","text":"key AKIAABCDEFGHIJKLMNOP"}], "isError":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"intercept", "test", "-c", cfg, "--tool", "demo__echo", "--result", result}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := `{"content":[{"type":"text","text":"key [redacted]"}], "isError":false}` + "\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if !strings.Contains(stderr.String(), "redact-secrets (redact, result): modify") {
		t.Errorf("stderr: %s", stderr.String())
	}

	args := filepath.Join(dir, "args.json")
	if err := os.WriteFile(args, []byte(`{"sql":"drop table users"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"intercept", "test", "-c", cfg, "--tool", "demo__echo", "--arguments", args}, &stdout, &stderr); code != exitDenied {
		t.Fatalf("exit %d, want %d: %s", code, exitDenied, stderr.String())
	}
	if !strings.Contains(stderr.String(), "refused by no-drop-table") {
		t.Errorf("stderr: %s", stderr.String())
	}
}
