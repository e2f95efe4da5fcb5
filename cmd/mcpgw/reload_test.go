package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitLogs waits until n log lines with msg were written and returns them.
func (p *proc) waitLogs(t *testing.T, msg string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var out []map[string]any
		p.mu.Lock()
		for _, m := range p.logs {
			if m["msg"] == msg {
				out = append(out, m)
			}
		}
		p.mu.Unlock()
		if len(out) >= n {
			return out
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	t.Fatalf("fewer than %d %q log lines", n, msg)
	return nil
}

func demoConfig(exe string, names ...string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nupstreams:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s:\n    command: [%q, demo-server]\n    protocol: legacy\n", n, exe)
	}
	return b.String()
}

// SIGHUP on mcpgw run re-reads --config: an added upstream serves on the
// session opened before; a broken file is refused with its problems and
// changes nothing.
func TestSIGHUPReloadsConfig(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "mcpgw.yaml")
	if err := os.WriteFile(cfg, []byte(demoConfig(exe, "demo")), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startMCPGW(t, "run", "-c", cfg, "--log-format", "json")
	mcpURL := p.field(t, "serving MCP", "url").(string)
	p.field(t, "upstream ready", "protocol_version")
	resp, _, err := post(mcpURL, "", initialize)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %v %v", resp, err)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	_, _, _ = post(mcpURL, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"extra__add","arguments":{"a":2,"b":3}}}`
	if _, body, _ := post(mcpURL, session, call); !strings.Contains(string(body), "unknown tool") {
		t.Fatalf("extra__add before the reload: %s", body)
	}

	if err := os.WriteFile(cfg, []byte(demoConfig(exe, "demo", "extra")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	line := p.waitLogs(t, "config reloaded", 1)[0]
	if fmt.Sprint(line["added"]) != "[extra]" {
		t.Errorf("reload line: %v, want added [extra]", line)
	}
	_, body, err := post(mcpURL, session, call)
	if err != nil || !strings.Contains(string(body), `"isError":false`) && !strings.Contains(string(body), "5") {
		t.Fatalf("extra__add after the reload: %v %s", err, body)
	}
	if strings.Contains(string(body), `"error"`) {
		t.Fatalf("extra__add after the reload: %s", body)
	}

	// A broken file: refused, logged with its problems, nothing changes.
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nupstreams:\n  demo: {bogus: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	failed := p.waitLogs(t, "config reload failed; the running config is unchanged", 1)[0]
	if !strings.Contains(fmt.Sprint(failed["problems"]), "bogus") {
		t.Errorf("failure line lacks the problem: %v", failed)
	}
	if _, body, _ := post(mcpURL, session, call); strings.Contains(string(body), `"error"`) {
		t.Errorf("extra__add after a failed reload: %s", body)
	}
}

// --watch reloads when the file changes.
func TestWatchReloadsConfig(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "mcpgw.yaml")
	if err := os.WriteFile(cfg, []byte(demoConfig(exe, "demo")), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startMCPGW(t, "run", "-c", cfg, "--log-format", "json", "--watch")
	p.field(t, "serving MCP", "url")
	p.field(t, "upstream ready", "protocol_version")
	if err := os.WriteFile(cfg, []byte(demoConfig(exe, "demo", "extra")), 0o600); err != nil {
		t.Fatal(err)
	}
	line := p.waitLogs(t, "config reloaded", 1)[0]
	if fmt.Sprint(line["added"]) != "[extra]" {
		t.Errorf("reload line: %v, want added [extra]", line)
	}
}
