package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/tlsconf/tlstest"
)

// TestPolicyExplainClientCert: the principal a client certificate maps to
// is matched by a policy rule, and explain shows it.
func TestPolicyExplainClientCert(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tls.yaml")
	if err := os.WriteFile(cfg, []byte(`
listen: 127.0.0.1:8443
tls: {cert_file: /c, key_file: /k, client_ca_file: /ca}
auth:
  client_certificates: {principal: common_name, groups: [certs]}
upstreams:
  secure: {url: "https://up.example.com/mcp"}
policy:
  default: deny
  rules:
    - match: {subjects: [alice]}
      allow: ["secure__*"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "clients")
	alice := tlstest.Write(t, dir, "alice.crt", ca.Client(t, "alice").CertPEM)
	bob := tlstest.Write(t, dir, "bob.crt", ca.Client(t, "bob").CertPEM)

	code, out, errs := runCLI("policy", "explain", "--config", cfg, "--client-cert", alice, "--tool", "secure__echo")
	if code != 0 || !strings.Contains(out, "ALLOW tool secure__echo") || !strings.Contains(out, "subject alice") || !strings.Contains(out, "rules[0]") {
		t.Errorf("alice: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI("policy", "explain", "--config", cfg, "--client-cert", bob, "--tool", "secure__echo")
	if code != exitDenied || !strings.Contains(out, "DENY tool secure__echo") || !strings.Contains(out, "subject bob") {
		t.Errorf("bob: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = runCLI("policy", "explain", "--config", cfg, "--client-cert", cfg, "--tool", "secure__echo")
	if code != exitUsage || !strings.Contains(errs, "no PEM certificate") {
		t.Errorf("not a certificate: exit %d, %s", code, errs)
	}
}
