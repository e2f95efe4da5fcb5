package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"testing"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/tlsconf/tlstest"
)

func TestClientCertificatePrincipal(t *testing.T) {
	ca := tlstest.NewCA(t, "clients")
	leaf := ca.Issue(t, tlstest.Opts{CN: "alice", Client: true, DNS: []string{"agent.example"}, Emails: []string{"a@example.com"},
		URIs: []string{"https://example.com/x", "spiffe://example.org/ns/ci/sa/agent"}})
	for field, want := range map[string]string{
		config.CertCommonName: "alice", config.CertDNSSAN: "agent.example", config.CertEmailSAN: "a@example.com",
		config.CertURISAN: "https://example.com/x", config.CertSPIFFEID: "spiffe://example.org/ns/ci/sa/agent",
	} {
		if got := auth.CertificateSubject(leaf.Cert, field); got != want {
			t.Errorf("%s = %q, want %q", field, got, want)
		}
	}

	cfg := &config.Config{Auth: &config.Auth{
		ClientCertificates: &config.ClientCertificates{Principal: config.CertSPIFFEID, Groups: []string{"agents"}},
		APIKeys:            []config.APIKey{{Name: "ci", Key: "ci-secret-0123456789"}},
	}}
	a, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	req := func(cert *x509.Certificate, apiKey string) (*auth.Principal, error) {
		r := httptest.NewRequest("POST", "https://gw.example/mcp", nil)
		if cert != nil {
			r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert, ca.Cert}}}
		}
		if apiKey != "" {
			r.Header.Set("X-Api-Key", apiKey)
		}
		return a.Authenticate(r, "https://gw.example/mcp")
	}
	p, err := req(leaf.Cert, "")
	if err != nil || p.Subject != "spiffe://example.org/ns/ci/sa/agent" || p.Certificate != config.CertSPIFFEID || !p.InGroup("agents") {
		t.Fatalf("certificate principal = %+v, %v", p, err)
	}
	if p.String() != "cert:spiffe://example.org/ns/ci/sa/agent" || p.Key() == (&auth.Principal{Subject: p.Subject}).Key() {
		t.Errorf("String %q / Key %q must mark the certificate source", p.String(), p.Key())
	}
	// A header credential is judged instead of the certificate.
	if p, err := req(leaf.Cert, "ci-secret-0123456789"); err != nil || p.APIKey != "ci" {
		t.Errorf("with an API key too: %+v, %v; want the API key's principal", p, err)
	}
	if _, err := req(leaf.Cert, "wrong-key-0123456789"); err == nil {
		t.Error("a wrong API key beside a good certificate was accepted")
	}
	// A certificate without the field is refused, naming it.
	bare := ca.Client(t, "bob")
	if _, err := req(bare.Cert, ""); err == nil {
		t.Error("a certificate without a SPIFFE ID was accepted")
	}
	// No certificate: the usual missing-credentials refusal.
	if _, err := req(nil, ""); err == nil {
		t.Error("no credential accepted")
	}
}
