package peruser

import (
	"net/http"
	"net/url"
	"slices"
)

// BrowserUsers is the gateway's browser session (its own sign-in, the
// login server's): who the user of a browser is. With it, a start link
// opens only in the browser of the principal it was made for, so a link
// that leaks (tool-result text a prompt injection can read, a link
// someone is sent) cannot attach one user's upstream account to another
// user: the MCP "confused deputy". Without it, the link alone is trusted
// and mcpgw validate warns.
type BrowserUsers interface {
	// User is the browser's signed-in gateway user; ok is false when the
	// browser has no (valid) session.
	User(r *http.Request) (u BrowserUser, ok bool)
	// SignIn answers r by sending the browser to sign in at the gateway
	// and, once signed in, back to returnTo (a URL of the gateway).
	SignIn(w http.ResponseWriter, r *http.Request, returnTo string)
}

// BrowserUser is a browser's signed-in user.
type BrowserUser struct {
	// Principals are the principal keys (auth.Principal.Key) this user
	// is known by on the gateway's routes: the subject under the
	// gateway's own tokens and, where the provider's tokens are also
	// accepted, under the provider's issuer.
	Principals []string
	// Name is shown on pages ("alice@https://login.example.com").
	Name string
}

// owns reports whether u is the principal key p.
func (u BrowserUser) owns(p string) bool { return slices.Contains(u.Principals, p) }

// browserUser checks that the browser of r is signed in as principal.
// It answers r and returns false when not: no session sends the browser
// to sign in and back to the same start link (retry: the start page);
// another user gets a page saying the link is not theirs. Nothing about
// the link's own principal is shown.
func (s *Source) browserUser(w http.ResponseWriter, r *http.Request, principal string, retry bool) bool {
	if s.o.Browser == nil {
		return true
	}
	u, ok := s.o.Browser.User(r)
	if !ok {
		if retry {
			s.o.Metrics.flow(s.o.Upstream, "sign_in")
			s.o.Browser.SignIn(w, r, s.here(r))
			return false
		}
		s.refuse(w, r, http.StatusForbidden, reasonOtherUser, "This browser is no longer signed in to the gateway, so this authorization was refused and nothing was linked. Sign in to the gateway, then retry the request in your app to get a new link.")
		return false
	}
	if !u.owns(principal) {
		s.refuse(w, r, http.StatusForbidden, reasonOtherUser, "This authorization link was made for another gateway user, not for you ("+u.Name+", as signed in to the gateway in this browser). Nothing was linked to either account. A link works only for the user whose app asked for it: if someone sent you this link, do not use it, and tell the gateway's operator.")
		return false
	}
	return true
}

// here is the start page r asked for, on the gateway's public URL (where
// to come back after signing in): built on public_url rather than on r's
// path, which a proxy in front may have shortened.
func (s *Source) here(r *http.Request) string {
	return s.start + "?" + url.Values{"t": {r.URL.Query().Get("t")}}.Encode()
}

// withPrompt asks the authorization server for fresh consent (OpenID
// Connect's prompt=consent; RFC 6749 servers ignore a parameter they do
// not know), so a provider that remembers a consent cannot complete a
// flow in a browser without its user seeing it.
func withPrompt(authURL string) string {
	u, err := url.Parse(authURL)
	if err != nil {
		return authURL
	}
	q := u.Query()
	q.Set("prompt", "consent")
	u.RawQuery = q.Encode()
	return u.String()
}
