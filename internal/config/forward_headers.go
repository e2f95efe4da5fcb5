package config

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// ForwardHeader is one downstream request header an HTTP upstream gets
// from its caller (upstreams.NAME.forward_headers): a user's own personal
// access token for a SaaS server, a tenant header. An upstream that
// forwards headers is per caller, like per-user credentials: each
// downstream session (or, for stateless requests, each principal) has its
// own upstream connection, so a value never reaches another caller's.
// Values are never logged; audit records name the headers that were
// present.
type ForwardHeader struct {
	// Name is the downstream request header to read.
	Name string `yaml:"name"`
	// As is the header name sent upstream (Name when empty). Authorization
	// is allowed here, for an upstream with no credential of its own: the
	// caller's own token for that upstream, sent under a name of its own
	// downstream (the gateway's own Authorization never goes upstream).
	As string `yaml:"as"`
}

// Upstream returns the header name the upstream gets.
func (f ForwardHeader) Upstream() string {
	if f.As != "" {
		return http.CanonicalHeaderKey(f.As)
	}
	return http.CanonicalHeaderKey(f.Name)
}

// forwardNeverRead are downstream headers that are never forwarded: the
// caller's credential for the gateway (DESIGN.md: no token passthrough),
// its cookies, the gateway's own session and protocol headers, and what
// frames the HTTP message.
var forwardNeverRead = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Mcp-Session-Id", "Mcp-Protocol-Version",
	"Mcp-Method", "Mcp-Name", "Last-Event-Id", "Host", "Content-Length", "Content-Type",
	"Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Keep-Alive", "Accept",
	"Origin", "Dpop",
}

// forwardNeverSent are upstream header names a forwarded value may not
// take: the gateway's own session, protocol and framing headers.
var forwardNeverSent = []string{
	"Proxy-Authorization", "Cookie", "Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method",
	"Mcp-Name", "Last-Event-Id", "Host", "Content-Length", "Content-Type", "Transfer-Encoding",
	"Connection", "Upgrade", "Te", "Trailer", "Keep-Alive", "Accept", "Dpop",
}

// forwardHeaders validates upstreams.NAME.forward_headers.
func (v *validator) forwardHeaders(p string, u *Upstream, hasCmd bool) {
	if len(u.ForwardHeaders) == 0 {
		return
	}
	fp := strictyaml.JoinPath(p, "forward_headers")
	if hasCmd {
		v.add(fp, "forward_headers applies only to url upstreams (a stdio child gets no HTTP headers); remove it")
		return
	}
	if !v.cfg.Auth.Enabled() {
		v.add(fp, "needs downstream authentication: the values travel with each authenticated caller to that caller's own upstream connection, and without auth every caller would be the same anonymous one; configure auth.oidc, auth.issuers or auth.api_keys")
	}
	ownCredential := u.OAuth != nil || u.Auth != nil
	static := map[string]bool{}
	for k := range u.Headers {
		static[http.CanonicalHeaderKey(k)] = true
	}
	if static["Authorization"] {
		ownCredential = true
	}
	seenName, seenAs := map[string]int{}, map[string]int{}
	for i, f := range u.ForwardHeaders {
		ep := fmt.Sprintf("%s[%d]", fp, i)
		name, as := http.CanonicalHeaderKey(f.Name), f.Upstream()
		switch {
		case !validHeaderName(f.Name):
			v.add(strictyaml.JoinPath(ep, "name"), fmt.Sprintf("%q is not a header name; use letters, digits and -, e.g. X-Tenant", f.Name))
			continue
		case containsFold(forwardNeverRead, name):
			fix := "remove it"
			if name == "Authorization" {
				fix = "have the client send the upstream's token under a header of its own, e.g. X-Upstream-Token, with as: Authorization"
			}
			v.add(strictyaml.JoinPath(ep, "name"), fmt.Sprintf("%s is never forwarded (it is the caller's credential or session at the gateway, or frames the request); %s", name, fix))
			continue
		case f.As != "" && !validHeaderName(f.As):
			v.add(strictyaml.JoinPath(ep, "as"), fmt.Sprintf("%q is not a header name; use letters, digits and -, e.g. X-Tenant", f.As))
			continue
		case containsFold(forwardNeverSent, as):
			v.add(strictyaml.JoinPath(ep, "as"), fmt.Sprintf("%s is the gateway's own (session, protocol or framing) and cannot carry a forwarded value; choose another name", as))
			continue
		case as == "Authorization" && ownCredential:
			v.add(strictyaml.JoinPath(ep, "as"), "the upstream has a credential of its own (oauth:, auth: or an Authorization header), which a forwarded Authorization would replace; remove one of them")
			continue
		case static[as]:
			v.add(strictyaml.JoinPath(ep, "as"), fmt.Sprintf("%s is also set under headers:; one name, one value: remove it from one of them", as))
			continue
		}
		if j, dup := seenName[name]; dup {
			v.add(strictyaml.JoinPath(ep, "name"), fmt.Sprintf("%s is also forwarded by forward_headers[%d] (header names ignore case); forward it once", name, j))
		} else if j, dup := seenAs[as]; dup {
			v.add(ep, fmt.Sprintf("sends %s upstream like forward_headers[%d] (header names ignore case); give each forwarded header its own upstream name", as, j))
		}
		seenName[name], seenAs[as] = i, i
	}
}

// validHeaderName reports whether s is an RFC 9110 field name.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r >= 0x80 || !(r == '-' || r == '_' || r == '.' || r == '!' || r == '#' || r == '$' || r == '%' || r == '&' || r == '\'' || r == '*' || r == '+' || r == '^' || r == '`' || r == '|' || r == '~' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
