package auth

import (
	"crypto/x509"
	"net/http"
	"slices"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/principal"
)

// hasCredentialHeader reports whether r carries a bearer token or API
// key: such a credential is the caller's explicit choice and is judged
// instead of its client certificate.
func hasCredentialHeader(r *http.Request) bool {
	return len(r.Header.Values("Authorization")) > 0 || len(r.Header.Values("X-Api-Key")) > 0
}

// certificate returns the principal of r's client certificate, which the
// TLS handshake verified against tls.client_ca_file; nil, nil when r has
// none (plain HTTP, or client_auth: optional and no certificate).
func (a *Authenticator) certificate(r *http.Request) (*Principal, *Error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, nil
	}
	leaf := r.TLS.VerifiedChains[0][0]
	field := a.certs.PrincipalField()
	sub := CertificateSubject(leaf, field)
	if sub == "" {
		return nil, errorf(Malformed, "the client certificate has no "+field+" to name its principal (auth.client_certificates.principal); issue it with one, or choose another field")
	}
	return &Principal{
		Subject:        sub,
		Certificate:    field,
		Groups:         slices.Clone(a.certs.Groups),
		Scopes:         slices.Clone(a.certs.Scopes),
		PreparedClaims: principal.NewClaims(nil),
	}, nil
}

// CertificateSubject reads the principal's subject from field of a
// verified certificate ("" when it has none): the first SAN of the kind,
// or the common name.
func CertificateSubject(c *x509.Certificate, field string) string {
	switch field {
	case config.CertSPIFFEID:
		for _, u := range c.URIs {
			if strings.EqualFold(u.Scheme, "spiffe") {
				return u.String()
			}
		}
	case config.CertURISAN:
		if len(c.URIs) > 0 {
			return c.URIs[0].String()
		}
	case config.CertDNSSAN:
		if len(c.DNSNames) > 0 {
			return c.DNSNames[0]
		}
	case config.CertEmailSAN:
		if len(c.EmailAddresses) > 0 {
			return c.EmailAddresses[0]
		}
	default:
		return c.Subject.CommonName
	}
	return ""
}
