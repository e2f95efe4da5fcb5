package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/zitadel/oidc/v3/example/server/storage"
)

// modes wraps the example OP with the behaviours of real providers the
// tests need and the example lacks: Entra ID's refusal of the resource
// parameter, an RFC 8414 document beside the OpenID one, and a browser
// that stays signed in with remembered consent. The OP never offers
// dynamic client registration (no registration_endpoint, no /register):
// clients are the config's, as at a company's provider.
type modes struct {
	cfg    *Config
	store  *store
	issuer string
	next   http.Handler
	key    []byte // signs the sign-in cookie

	mu       sync.Mutex
	consents map[string]map[string]bool // user id → client ids approved
}

const ssoCookie = "idp_sso"

func newModes(cfg *Config, st *store, issuer string, next http.Handler) *modes {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &modes{cfg: cfg, store: st, issuer: issuer, next: next, key: key, consents: map[string]map[string]bool{}}
}

func (m *modes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/.well-known/oauth-authorization-server" && m.cfg.Discovery == "both":
		// RFC 8414's document is the OpenID one (the same members).
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/.well-known/openid-configuration"
		m.next.ServeHTTP(w, r2)
	case r.URL.Path == "/auth" && m.cfg.RejectResource && m.rejectResource(w, r):
	case r.URL.Path == "/login/username" && r.Method == http.MethodGet && m.cfg.RememberConsent && m.autoApprove(w, r):
	case r.URL.Path == "/login/username" && r.Method == http.MethodPost && m.cfg.RememberConsent:
		m.login(w, r)
	default:
		m.next.ServeHTTP(w, r)
	}
}

// rejectResource answers an authorization request carrying resource the
// way Entra ID does (AADSTS9010010), at the client's registered redirect
// URI; it reports whether it answered.
func (m *modes) rejectResource(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil || !r.Form.Has("resource") {
		return false
	}
	c, err := m.store.GetClientByClientID(r.Context(), r.Form.Get("client_id"))
	redirect := r.Form.Get("redirect_uri")
	if err != nil || !slices.Contains(c.RedirectURIs(), redirect) {
		// Never redirect where the client did not register.
		http.Error(w, "invalid_target: the resource parameter is not supported (and the client or redirect_uri is unknown)", http.StatusBadRequest)
		return true
	}
	u, err := url.Parse(redirect)
	if err != nil {
		http.Error(w, "invalid redirect_uri", http.StatusBadRequest)
		return true
	}
	q := u.Query()
	q.Set("error", "invalid_target")
	q.Set("error_description", "AADSTS9010010: The resource parameter provided in the request doesn't match with the requested scopes.")
	if s := r.Form.Get("state"); s != "" {
		q.Set("state", s)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
	return true
}

// autoApprove completes an authorization request without the form when
// this browser is signed in as a user who approved the request's client
// before and the request does not ask to see the user again; it reports
// whether it answered.
func (m *modes) autoApprove(w http.ResponseWriter, r *http.Request) bool {
	user := m.signedIn(r)
	if user == nil {
		return false
	}
	id := r.URL.Query().Get("authRequestID")
	req, err := m.store.AuthRequestByID(r.Context(), id)
	if err != nil {
		return false
	}
	if ar, ok := req.(*storage.AuthRequest); ok {
		for _, p := range ar.Prompt {
			if p == "login" || p == "consent" || p == "select_account" {
				return false
			}
		}
	}
	m.mu.Lock()
	approved := m.consents[user.ID][req.GetClientID()]
	m.mu.Unlock()
	if !approved || m.store.CheckUsernamePassword(user.Username, user.Password, id) != nil {
		return false
	}
	http.Redirect(w, r, m.callback(id), http.StatusFound)
	return true
}

// callback is where the login UI sends the browser once the user is in
// (op.AuthCallbackURL of the example's /auth endpoint).
func (m *modes) callback(id string) string {
	return strings.TrimSuffix(m.issuer, "/") + "/auth/callback?id=" + url.QueryEscape(id)
}

// login runs the example's login form and, when it let the user in,
// signs this browser in and remembers the client as approved.
func (m *modes) login(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		http.Error(w, "reading the form: "+err.Error(), http.StatusBadRequest)
		return
	}
	form, _ := url.ParseQuery(string(body))
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	m.next.ServeHTTP(rec, r)
	if rec.Code == http.StatusFound {
		if u := m.store.users.GetUserByUsername(form.Get("username")); u != nil {
			if req, err := m.store.AuthRequestByID(context.WithoutCancel(r.Context()), form.Get("id")); err == nil {
				m.mu.Lock()
				if m.consents[u.ID] == nil {
					m.consents[u.ID] = map[string]bool{}
				}
				m.consents[u.ID][req.GetClientID()] = true
				m.mu.Unlock()
			}
			http.SetCookie(w, &http.Cookie{Name: ssoCookie, Value: u.ID + "." + m.sign(u.ID), Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (m *modes) sign(id string) string {
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(id))
	return hex.EncodeToString(mac.Sum(nil))
}

// signedIn is the user this browser's sign-in cookie names, or nil.
func (m *modes) signedIn(r *http.Request) *storage.User {
	c, err := r.Cookie(ssoCookie)
	if err != nil {
		return nil
	}
	id, sig, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(m.sign(id))) {
		return nil
	}
	return m.store.users.GetUserByID(id)
}
