package config_test

import (
	"strings"
	"testing"
)

func TestTLSConfigRefusals(t *testing.T) {
	const up = "upstreams: {s: {url: \"https://up.example.com/mcp\"}}\n"
	for _, c := range []struct{ name, yaml, path, want string }{
		{"listener without key", up + "tls: {cert_file: /c}\n", "tls", "needs both cert_file and key_file"},
		{"bad client_auth", up + "tls: {cert_file: /c, key_file: /k, client_ca_file: /ca, client_auth: maybe}\n", "tls.client_auth", "require (the default) or optional"},
		{"client_auth without CA", up + "tls: {cert_file: /c, key_file: /k, client_auth: optional}\n", "tls.client_auth", "needs client_ca_file"},
		{"TLS 1.1", up + "tls: {cert_file: /c, key_file: /k, min_version: \"1.1\"}\n", "tls.min_version", `"1.2" (the default) or "1.3"`},
		{"admin TLS 1.0", up + "admin: {listen: 127.0.0.1:9091, tls: {cert_file: /c, key_file: /k, min_version: \"1.0\"}}\n", "admin.tls.min_version", `"1.2"`},
		{"client certificates without CA", up + "auth: {client_certificates: {}}\n", "auth.client_certificates", "needs tls.client_ca_file"},
		{"unknown certificate field", up + "tls: {cert_file: /c, key_file: /k, client_ca_file: /ca}\nauth: {client_certificates: {principal: serial}}\n", "auth.client_certificates.principal", "common_name, spiffe_id"},
		{"upstream tls on http", "upstreams: {s: {url: \"http://up.example.com/mcp\", tls: {ca_file: /ca}}}\n", "upstreams.s.tls", "only to an https:// url"},
		{"upstream tls on stdio", "upstreams: {s: {command: [srv], tls: {ca_file: /ca}}}\n", "upstreams.s.tls", "only to url upstreams"},
		{"client cert without key", "upstreams: {s: {url: \"https://up.example.com/mcp\", tls: {cert_file: /c}}}\n", "upstreams.s.tls", "both cert_file and key_file"},
		{"skip verify with CA", "upstreams: {s: {url: \"https://up.example.com/mcp\", tls: {ca_file: /ca, insecure_skip_verify: true}}}\n", "upstreams.s.tls.insecure_skip_verify", "remove insecure_skip_verify"},
		{"proxy not a URL", "upstreams: {s: {url: \"https://up.example.com/mcp\", proxy: \"proxy:3128\"}}\n", "upstreams.s.proxy", "http://proxy.example.com:3128"},
		{"proxy on stdio", "upstreams: {s: {command: [srv], proxy: \"http://p:3128\"}}\n", "upstreams.s.proxy", "only to url upstreams"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := parseProblems(t, c.yaml, testEnv)
			for _, p := range ps {
				if p.Path == c.path && strings.Contains(p.Msg, c.want) {
					return
				}
			}
			t.Errorf("problems %v; want one at %s saying %q", ps, c.path, c.want)
		})
	}
}

func TestTLSConfigAccepted(t *testing.T) {
	c := mustParse(t, `
listen: 0.0.0.0:8443
tls: {cert_file: /c, key_file: /k, client_ca_file: /ca, client_auth: optional, min_version: "1.3"}
auth: {client_certificates: {principal: spiffe_id, groups: [agents]}}
upstreams:
  s:
    url: https://up.example.com/mcp
    proxy: http://user:pw@proxy.example.com:3128
    tls: {ca_file: /ca, cert_file: /c, key_file: /k, server_name: up.internal, min_version: "1.2"}
policy:
  rules:
    - match: {subjects: ["spiffe://example.org/agent"]}
      allow: ["s__*"]
`, testEnv)
	if !c.Auth.Enabled() || c.Auth.ClientCertificates.PrincipalField() != "spiffe_id" || c.Upstreams["s"].TLS.ServerName != "up.internal" {
		t.Errorf("config = %+v", c)
	}
	if p := c.Redacted().Upstreams["s"].Proxy; strings.Contains(p, "pw") {
		t.Errorf("redacted proxy %q shows its password", p)
	}
}
