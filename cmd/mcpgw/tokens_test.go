package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/credentials/peruser"
)

func TestTokensRevoke(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "tokens.json")
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "mcpgw.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
public_url: https://mcp.example.com
auth: {api_keys: [{name: ci, key: "0123456789abcdef"}]}
sessions: {key_file: %s}
upstreams:
  gh:
    url: https://api.example.com/mcp
    auth: {per_user: {client_id: mcpgw, issuer: https://idp.example.com, store: {file: %s}}}
  plain: {url: https://b.example.com/mcp}
`, keys, store)), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := peruser.OpenFile(store, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []string{"oidc\x00https://login.example.com/\x00alice", "oidc\x00https://login.example.com/\x00bob"} {
		if err := b.Put(ctx, peruser.StoreKey("gh", p), []byte("sealed"), time.Time{}); err != nil { // as earlier versions kept them
			t.Fatal(err)
		}
	}
	ring := [][]byte{make([]byte, 32)}
	for i := range ring[0] {
		ring[0][i] = byte(i) // the key file's key
	}
	keyed, err := peruser.StoreKeys(ring, "gh", "apikey\x00ci")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, keyed[0], []byte("sealed"), time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // on stdout (code 0) or stderr
		left int    // records left in the store
	}{
		{"no principal nor --all", []string{"tokens", "revoke", "--config", cfg, "--upstream", "gh"}, exitUsage, "exactly one of --principal PRINCIPAL and --all", 3},
		{"both", []string{"tokens", "revoke", "--config", cfg, "--upstream", "gh", "--principal", "apikey:ci", "--all"}, exitUsage, "exactly one", 3},
		{"an upstream without per_user", []string{"tokens", "revoke", "--config", cfg, "--upstream", "plain", "--all"}, exitError, `upstream "plain" has no auth.per_user; upstreams with per-user tokens: [gh]`, 3},
		{"a bad principal", []string{"tokens", "revoke", "--config", cfg, "--upstream", "gh", "--principal", "alice"}, exitError, "SUB@ISSUER", 3},
		{"alice", []string{"tokens", "revoke", "--config", cfg, "--upstream", "gh", "--principal", "alice@https://login.example.com/"}, 0, "revoked 1 token(s) for upstream gh", 2},
		{"alice again", []string{"tokens", "revoke", "--config", cfg, "--upstream", "gh", "--principal", "alice@https://login.example.com/"}, 0, "nothing revoked", 2},
		{"an API key's", []string{"tokens", "revoke", "-c", cfg, "--upstream", "gh", "--principal", "apikey:ci"}, 0, "revoked 1", 1},
		{"all", []string{"tokens", "revoke", "--config", cfg, "--upstream", "gh", "--all"}, 0, "revoked 1", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			got := stdout.String()
			if code != 0 {
				got = stderr.String()
			}
			if code != tc.code || !strings.Contains(got, tc.out) {
				t.Fatalf("exit %d, %q; want %d with %q", code, got, tc.code, tc.out)
			}
			if n, _ := b.Len(ctx); n != tc.left {
				t.Fatalf("%d records left, want %d", n, tc.left)
			}
		})
	}
}
