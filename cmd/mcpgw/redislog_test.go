package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRedisDownLogsStructured: with sessions.redis pointing at a port where
// nothing listens, go-redis' own dial failures reach the log as structured
// debug lines of the "redis" logger — never as bare "redis: …" lines on
// stderr (which it prints several times a second while Redis is down).
func TestRedisDownLogsStructured(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "mcpgw.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
sessions: {key_file: %s, redis: {addr: %q}}
upstreams:
  plain: {url: "http://127.0.0.1:1/mcp"}
`, keys, closed)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startMCPGW(t, "run", "-c", cfg, "--log-format", "json", "--log-level", "debug")
	p.field(t, "serving MCP", "url")
	deadline := time.Now().Add(20 * time.Second)
	for {
		p.mu.Lock()
		var routed bool
		var bare []string
		for _, m := range p.logs {
			if m["logger"] == "redis" && m["msg"] == "go-redis" && strings.Contains(fmt.Sprint(m["message"]), "dial") {
				routed = true
			}
		}
		for _, line := range p.raw {
			if strings.HasPrefix(line, "redis: ") {
				bare = append(bare, line)
			}
		}
		p.mu.Unlock()
		if len(bare) > 0 {
			t.Fatalf("go-redis printed to stderr unstructured: %q", bare)
		}
		if routed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no structured go-redis dial failure in the log")
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
}
