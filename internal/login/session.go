package login

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Cookie names (docs/login.md).
const (
	SessionCookie = "mcpgw_login"
	FlowCookie    = "mcpgw_login_flow"
)

// maxCookie bounds a sealed session: browsers drop cookies past 4 KiB.
const maxCookie = 3800

// browserSession is what the session cookie seals.
type browserSession struct {
	User    User   `json:"u"`
	Expires int64  `json:"exp"`
	CSRF    string `json:"csrf"`
}

// flowCookie binds a sign-in at the provider to the browser that began it:
// the callback is accepted only from that browser (login CSRF, replayed
// state).
type flowCookie struct {
	Pending string `json:"p"`
	State   string `json:"st"`
	Expires int64  `json:"exp"`
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, ttl time.Duration) {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode}
	if ttl > 0 {
		c.MaxAge = int(ttl / time.Second)
	} else {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// session returns the browser's session, or nil.
func (s *Server) session(r *http.Request) *browserSession {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil
	}
	b, ok := s.keys.open(c.Value, SessionCookie)
	if !ok {
		return nil
	}
	var bs browserSession
	if json.Unmarshal(b, &bs) != nil || bs.User.Subject == "" || s.now().Unix() > bs.Expires {
		return nil
	}
	return &bs
}

// startSession gives the browser a session for u; false when u does not
// fit in a cookie.
func (s *Server) startSession(w http.ResponseWriter, u *User) (*browserSession, bool) {
	bs := &browserSession{User: *u, Expires: s.now().Add(s.cfg.SessionTTL.D()).Unix(), CSRF: randomToken(24)}
	b, _ := json.Marshal(bs)
	v := s.keys.seal(b, SessionCookie)
	if len(v) > maxCookie {
		return nil, false
	}
	s.setCookie(w, SessionCookie, v, s.cfg.SessionTTL.D())
	return bs, true
}

// User returns the signed-in user of the browser that sent r, or nil.
func (s *Server) User(r *http.Request) *User {
	if bs := s.session(r); bs != nil {
		u := bs.User
		return &u
	}
	return nil
}

// SignIn sends the browser to sign in at the provider and then back to
// returnTo, which must be same-origin with public_url (a path, or an
// absolute URL of public_url's origin); anything else is refused with 400
// and never followed.
func (s *Server) SignIn(w http.ResponseWriter, r *http.Request, returnTo string) {
	target, ok := s.sameOrigin(returnTo)
	if !ok {
		s.met.refusal("return_to")
		s.page(w, http.StatusBadRequest, "Sign-in refused", "The address to return to after signing in ("+returnTo+") is not a page of this gateway; only same-origin return addresses are followed.")
		return
	}
	p := &pending{returnTo: target}
	s.toProvider(w, r, p)
}

// sameOrigin resolves a return address: a path (not //host) or an
// absolute URL of the gateway's own origin, without user info.
func (s *Server) sameOrigin(raw string) (string, bool) {
	if raw == "" || strings.ContainsAny(raw, "\\\r\n\t") {
		return "", false
	}
	if strings.HasPrefix(raw, "/") && !strings.HasPrefix(raw, "//") {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "" || u.Host != "" {
			return "", false
		}
		return s.origin + u.RequestURI(), true
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || !strings.EqualFold(u.Scheme+"://"+u.Host, s.origin) {
		return "", false
	}
	return s.origin + u.RequestURI(), true
}

// serveSignout ends the browser session (POST with the session's csrf).
func (s *Server) serveSignout(w http.ResponseWriter, r *http.Request) {
	bs, ok := s.checkForm(w, r)
	if !ok {
		return
	}
	_ = bs
	s.setCookie(w, SessionCookie, "", 0)
	s.page(w, http.StatusOK, "Signed out", "You are signed out of the gateway.")
}
