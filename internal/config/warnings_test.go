package config_test

import (
	"strings"
	"testing"
)

// Issue 27.8c: one stdio child is shared by every client and principal
// unless stateful: true; with auth on and several principals, that is
// worth a warning (never a refusal). And an admin listener off loopback
// without a token shows the catalog before policy to whoever reaches it.
func TestWarnings(t *testing.T) {
	const ups = "upstreams:\n  browser: {command: [npx, playwright-mcp]}\n  memory: {command: [npx, server-memory], stateful: true}\n  remote: {url: https://api.example.com/mcp}\n"
	shared := "upstreams.browser: one stdio child serves every client and every principal"
	const perUser = "public_url: https://mcp.example.com\nupstreams:\n  saas:\n    url: https://saas.example.com/mcp\n    auth: {per_user: {client_id: mcpgw, client_secret: s, issuer: https://as.example.com}}\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings, one per warning, in order
	}{
		{"no auth: one anonymous principal", ups, nil},
		{"auth with one principal", ups + "auth:\n  api_keys:\n    - {name: a, key: key-a-0123456789, principal: bot}\n    - {name: b, key: key-b-0123456789, principal: bot}\n", nil},
		{"auth with two API-key principals", ups + "auth:\n  api_keys:\n    - {name: a, key: key-a-0123456789}\n    - {name: b, key: key-b-0123456789}\n", []string{shared}},
		{"auth with an issuer", ups + "public_url: https://mcp.example.com\nauth:\n  oidc: {issuer: https://idp.example.com}\n", []string{shared}},
		{"a stdio upstream no route exposes", ups + "routes:\n  - {path: /mcp, upstreams: [remote, memory]}\nauth:\n  api_keys:\n    - {name: a, key: key-a-0123456789}\n    - {name: b, key: key-b-0123456789}\n", nil},
		{"admin on loopback", ups + "admin: {listen: 127.0.0.1:9091}\n", nil},
		{"admin off loopback, no token", ups + "admin: {listen: 0.0.0.0:9091}\n", []string{`admin.listen: "0.0.0.0:9091" is not loopback and admin.token_file is not set`}},
		{"admin off loopback, token", ups + "admin: {listen: 0.0.0.0:9091, token_file: /run/secrets/admin}\n", nil},
		// Issue 29: a per-user start link without the gateway's browser
		// session binds whoever opens it.
		{"per-user upstream without login", perUser + "auth:\n  api_keys:\n    - {name: a, key: key-a-0123456789}\n", []string{"upstreams.saas.auth.per_user: without login: the gateway cannot tell who a browser's user is"}},
		{"per-user upstream with login", perUser + "login:\n  provider: {issuer: https://login.example.com, client_id: mcpgw, client_secret: s3cret}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.yaml, nil)
			got := c.Warnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "; ") {
					t.Errorf("warning %q, want %q and, after \"; \", the fix", got[i], w)
				}
			}
		})
	}
}
