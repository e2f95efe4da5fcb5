package config

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// ListenerTLS serves a listener (tls:, admin.tls:) over TLS. The files are
// read again when they change (internal/tlsconf), so a certificate rotated
// on disk (cert-manager) is served to new connections without a restart
// and without dropping open ones.
type ListenerTLS struct {
	// CertFile holds the PEM certificate followed by its chain; KeyFile
	// its private key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile holds the PEM CAs that client certificates must chain
	// to. When set, a client certificate is asked for (see ClientAuth).
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is "require" (the default with a client_ca_file: a
	// connection without a valid client certificate is refused in the
	// handshake) or "optional" (one is verified when given; callers
	// without one use a bearer token or API key).
	ClientAuth string `yaml:"client_auth"`
	// MinVersion is "1.2" (the default) or "1.3".
	MinVersion string `yaml:"min_version"`
}

// The client_auth values.
const (
	ClientAuthRequire  = "require"
	ClientAuthOptional = "optional"
)

// UpstreamTLS configures TLS to an https upstream. The files are read again
// when they change.
type UpstreamTLS struct {
	// CAFile holds the PEM CAs the upstream's certificate must chain to,
	// instead of the system's trust store.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate (and chain) and key
	// presented to an upstream that asks for one (mutual TLS).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the upstream's certificate must carry (and
	// the SNI sent) when it is not the URL's host.
	ServerName string `yaml:"server_name"`
	// MinVersion is "1.2" (the default) or "1.3".
	MinVersion string `yaml:"min_version"`
	// InsecureSkipVerify accepts any certificate the upstream shows: for
	// tests only; the gateway logs a warning at every start.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// ClientCertificates maps a verified client certificate to a principal.
type ClientCertificates struct {
	// Principal is the certificate field that becomes the principal's
	// subject: common_name (the default), spiffe_id (the spiffe:// URI
	// SAN), dns_san, email_san or uri_san (the first of its kind).
	Principal string `yaml:"principal"`
	// Groups are given to every principal authenticated this way.
	Groups []string `yaml:"groups"`
	// Scopes are granted to every principal authenticated this way.
	Scopes []string `yaml:"scopes"`
}

// The client_certificates.principal values.
const (
	CertCommonName = "common_name"
	CertSPIFFEID   = "spiffe_id"
	CertDNSSAN     = "dns_san"
	CertEmailSAN   = "email_san"
	CertURISAN     = "uri_san"
)

// PrincipalField returns the configured field (common_name when unset).
func (c *ClientCertificates) PrincipalField() string {
	if c == nil || c.Principal == "" {
		return CertCommonName
	}
	return c.Principal
}

// tls checks tls:, admin.tls: and auth.client_certificates.
func (v *validator) tls() {
	c := v.cfg
	v.listenerTLS("tls", c.TLS)
	if c.Admin != nil {
		v.listenerTLS("admin.tls", c.Admin.TLS)
	}
	if c.Auth == nil || c.Auth.ClientCertificates == nil {
		return
	}
	cc := c.Auth.ClientCertificates
	switch cc.PrincipalField() {
	case CertCommonName, CertSPIFFEID, CertDNSSAN, CertEmailSAN, CertURISAN:
	default:
		v.add("auth.client_certificates.principal", fmt.Sprintf("%q is not a certificate field; use common_name, spiffe_id, dns_san, email_san or uri_san", cc.Principal))
	}
	v.scopes("auth.client_certificates.scopes", cc.Scopes)
	if c.TLS == nil || c.TLS.ClientCAFile == "" {
		v.add("auth.client_certificates", "needs tls.client_ca_file, the CA that client certificates are verified with; set tls: {cert_file, key_file, client_ca_file}")
	}
}

func (v *validator) listenerTLS(p string, t *ListenerTLS) {
	if t == nil {
		return
	}
	if t.CertFile == "" || t.KeyFile == "" {
		v.add(p, "needs both cert_file and key_file (PEM files: the certificate with its chain, and its key)")
	}
	switch t.ClientAuth {
	case "", ClientAuthRequire, ClientAuthOptional:
		if t.ClientAuth != "" && t.ClientCAFile == "" {
			v.add(strictyaml.JoinPath(p, "client_auth"), "needs client_ca_file, the CA that client certificates are verified with; set it, or remove client_auth")
		}
	default:
		v.add(strictyaml.JoinPath(p, "client_auth"), fmt.Sprintf("%q is not a client_auth mode; use require (the default) or optional", t.ClientAuth))
	}
	v.tlsVersion(strictyaml.JoinPath(p, "min_version"), t.MinVersion)
}

func (v *validator) tlsVersion(p, ver string) {
	switch ver {
	case "", "1.2", "1.3":
	default:
		v.add(p, fmt.Sprintf("%q is not an accepted TLS version; use \"1.2\" (the default) or \"1.3\"", ver))
	}
}

// upstreamTLS checks an upstream's tls: and proxy:.
func (v *validator) upstreamTLS(p string, u *Upstream, stdio bool) {
	if t := u.TLS; t != nil {
		tp := strictyaml.JoinPath(p, "tls")
		switch {
		case stdio:
			v.add(tp, "applies only to url upstreams; remove it")
		case !strings.HasPrefix(strings.ToLower(u.URL), "https://"):
			v.add(tp, "applies only to an https:// url; change the url to https://, or remove tls:")
		}
		if (t.CertFile == "") != (t.KeyFile == "") {
			v.add(tp, "needs both cert_file and key_file for a client certificate, or neither")
		}
		if t.InsecureSkipVerify && (t.CAFile != "" || t.ServerName != "") {
			v.add(strictyaml.JoinPath(tp, "insecure_skip_verify"), "skips the verification that ca_file and server_name configure; remove insecure_skip_verify")
		}
		v.tlsVersion(strictyaml.JoinPath(tp, "min_version"), t.MinVersion)
	}
	if u.Proxy != "" {
		pp := strictyaml.JoinPath(p, "proxy")
		if stdio {
			v.add(pp, "applies only to url upstreams; remove it")
			return
		}
		pu, err := url.Parse(u.Proxy)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || (pu.Path != "" && pu.Path != "/") {
			v.add(pp, fmt.Sprintf("%q is not a proxy URL; write it as http://proxy.example.com:3128", u.Proxy))
		}
	}
}
