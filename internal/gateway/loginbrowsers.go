package gateway

import (
	"net/http"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/credentials/peruser"
	"github.com/mcpgw/mcpgw/internal/login"
)

// loginBrowsers is the login server's browser session as the per-user
// start pages see it (peruser.BrowserUsers): who a browser's user is, by
// the principal keys that user's calls carry, so a start link opens only
// in its own user's browser.
type loginBrowsers struct{ s *login.Server }

// User implements peruser.BrowserUsers. A signed-in user is the principal
// of the gateway's own tokens (iss the gateway, sub the provider's) and,
// where the provider's tokens are accepted too, of those (iss the
// provider's): a link made for either is theirs.
func (b loginBrowsers) User(r *http.Request) (peruser.BrowserUser, bool) {
	u := b.s.User(r)
	if u == nil || u.Subject == "" {
		return peruser.BrowserUser{}, false
	}
	local := &auth.Principal{Subject: u.Subject, Issuer: b.s.Issuer()}
	provider := &auth.Principal{Subject: u.Subject, Issuer: u.Issuer}
	return peruser.BrowserUser{Principals: []string{local.Key(), provider.Key()}, Name: local.String()}, true
}

// SignIn implements peruser.BrowserUsers.
func (b loginBrowsers) SignIn(w http.ResponseWriter, r *http.Request, returnTo string) {
	b.s.SignIn(w, r, returnTo)
}
