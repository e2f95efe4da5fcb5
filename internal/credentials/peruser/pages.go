package peruser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
)

// The pages a user's browser visits. The browser carries no gateway
// bearer token, so the start page trusts only what it can open: the link
// it was given (sealed for this upstream, unexpired, used once). It binds
// the flow to this browser with a cookie (HttpOnly, SameSite=Lax, scoped
// to the callback) that seals the state's nonce and the flow (its PKCE
// verifier), and sends the browser only ever to the authorization
// server's endpoint. The callback trusts only its state (sealed,
// unexpired, used once) and that cookie, so a callback forged or replayed
// in another browser is refused (CSRF); every refusal is a plain page
// naming what was wrong, never a redirect.

// stateClaims is what the state parameter carries, sealed: the flow's
// principal, elicitation, expiry and nonce (its single use).
type stateClaims struct {
	Principal   string `json:"p"`
	Elicitation string `json:"e"`
	Expires     int64  `json:"x"`
	Nonce       string `json:"n"`
}

// cookieClaims is what the flow cookie carries, sealed: the state's nonce
// (binding this browser to that state) and what the client needs to
// complete the flow (the PKCE verifier among it, so the verifier never
// appears in a URL).
type cookieClaims struct {
	Nonce string          `json:"n"`
	Flow  json.RawMessage `json:"f"`
}

func (s *Source) cookieAD() []byte { return []byte(purposeState + "\x00cookie\x00" + s.o.Upstream) }

func (s *Source) stateAD() []byte { return []byte(purposeState + "\x00" + s.o.Upstream) }

// cookieName is the flow cookie's name, per upstream.
func (s *Source) cookieName() string {
	return "mcpgw_oauth_" + strings.ReplaceAll(s.o.Upstream, ".", "_")
}

func (s *Source) secure() bool { return strings.HasPrefix(s.o.PublicURL, "https:") }

// ServeStart is GET <public>/oauth/upstream/NAME/start?t=LINK.
func (s *Source) ServeStart(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	var c linkClaims
	plain, ok := s.links.openString(r.URL.Query().Get("t"), s.linkAD())
	if !ok || json.Unmarshal(plain, &c) != nil {
		s.refuse(w, r, http.StatusBadRequest, reasonBadLink, "This authorization link is not valid: it was changed, cut short, or made for another upstream or gateway. Retry the request in your app to get a new link.")
		return
	}
	now := s.o.Clock()
	exp := time.Unix(c.Expires, 0)
	if !now.Before(exp) {
		s.refuse(w, r, http.StatusBadRequest, reasonExpired, "This authorization link has expired. Retry the request in your app to get a new link.")
		return
	}
	// The link works only in its principal's signed-in browser; this
	// comes before the link is used, so signing in first and coming back
	// finds it unused.
	if !s.browserUser(w, r, c.Principal, true) {
		return
	}
	// The flow this start begins lives LinkLifetime from now.
	if !s.pending.start(c.Principal, now, now.Add(s.o.LinkLifetime)) {
		w.Header().Set("Retry-After", strconv.Itoa(int(s.o.LinkLifetime/time.Second)))
		s.refuse(w, r, http.StatusTooManyRequests, reasonBusy, fmt.Sprintf("You have %d authorizations of %s under way already (upstreams.%s.auth.per_user.max_links_per_principal). Finish one of them, or wait %s for them to expire, then retry the request in your app.", s.o.MaxLinksPerPrincipal, s.o.Upstream, s.o.Upstream, s.o.LinkLifetime))
		return
	}
	first, err := s.o.Once.Use(r.Context(), "l:"+c.Nonce, exp)
	if err != nil || !first {
		s.pending.done(c.Principal, now) // no flow was started
	}
	switch {
	case errors.Is(err, errOnceFull):
		s.refuse(w, r, http.StatusServiceUnavailable, reasonBusy, err.Error())
		return
	case err != nil:
		s.refuse(w, r, http.StatusServiceUnavailable, reasonUnavailable, "The gateway cannot check this link now (its store is unreachable). Retry in a minute.")
		return
	case !first:
		s.refuse(w, r, http.StatusBadRequest, reasonReplay, "This authorization link was already used; each link works once. Retry the request in your app to get a new link.")
		return
	}
	st := stateClaims{Principal: c.Principal, Elicitation: c.Elicitation, Expires: now.Add(s.o.LinkLifetime).Unix(), Nonce: randomID(16)}
	sp, _ := json.Marshal(st)
	state := s.states.sealString(sp, s.stateAD())
	flow, err := s.o.Client.Begin(r.Context(), state, s.redirect, c.stepUp())
	if err != nil {
		s.pending.done(c.Principal, now)
		s.o.Logger.Warn("per-user authorization: no authorization request", zap.String("upstream", s.o.Upstream), zap.Error(err))
		// The error quotes what servers answered (metadata, issuers):
		// it goes to the log, never onto the page.
		s.refuse(w, r, http.StatusBadGateway, reasonUnavailable, "The gateway could not start the authorization at the authorization server of "+s.o.Upstream+". Retry later; if it persists, tell the gateway's operator (the reason is in the gateway's log).")
		return
	}
	cp, _ := json.Marshal(cookieClaims{Nonce: st.Nonce, Flow: flow.Data})
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: s.states.sealString(cp, s.cookieAD()), Path: callbackPath(s.redirect),
		MaxAge: int(s.o.LinkLifetime / time.Second), HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode,
	})
	to := flow.AuthURL
	if s.o.Browser != nil {
		to = withPrompt(to)
	}
	s.o.Metrics.flow(s.o.Upstream, "started")
	w.Header().Set("Location", to)
	w.WriteHeader(http.StatusFound)
}

// callbackPath is the path part of the redirect URI (the cookie's Path).
func callbackPath(redirect string) string {
	if u, err := url.Parse(redirect); err == nil && u.Path != "" {
		return u.Path
	}
	return "/"
}

// ServeCallback is GET <public>/oauth/upstream/NAME/callback.
func (s *Source) ServeCallback(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	q := r.URL.Query()
	var st stateClaims
	plain, ok := s.states.openString(q.Get("state"), s.stateAD())
	if !ok || json.Unmarshal(plain, &st) != nil {
		s.refuse(w, r, http.StatusBadRequest, reasonBadState, "The state of this authorization answer is missing or not valid (changed, or not made by this gateway for "+s.o.Upstream+"). Nothing was stored. Retry the request in your app to get a new link.")
		return
	}
	exp := time.Unix(st.Expires, 0)
	if !s.o.Clock().Before(exp) {
		s.refuse(w, r, http.StatusBadRequest, reasonExpired, "This authorization took too long and has expired. Retry the request in your app to get a new link.")
		return
	}
	var cc cookieClaims
	ck, err := r.Cookie(s.cookieName())
	if err == nil {
		plain, ok := s.states.openString(ck.Value, s.cookieAD())
		if !ok || json.Unmarshal(plain, &cc) != nil {
			err = http.ErrNoCookie
		}
	}
	if err != nil || cc.Nonce != st.Nonce {
		s.refuse(w, r, http.StatusBadRequest, reasonCSRF, "This authorization answer did not come back to the browser that started it (its sign-in cookie is missing or different), so it was refused: someone may be trying to attach their account to yours. Open the link from your app again, in this browser.")
		return
	}
	// Checked again: the browser's user may have changed since the start.
	if !s.browserUser(w, r, st.Principal, false) {
		return
	}
	first, err := s.o.Once.Use(r.Context(), "s:"+st.Nonce, exp)
	switch {
	case errors.Is(err, errOnceFull):
		s.refuse(w, r, http.StatusServiceUnavailable, reasonBusy, err.Error())
		return
	case err != nil:
		s.refuse(w, r, http.StatusServiceUnavailable, reasonUnavailable, "The gateway cannot check this answer now (its store is unreachable). Retry the request in your app in a minute.")
		return
	case !first:
		s.refuse(w, r, http.StatusBadRequest, reasonReplay, "This authorization answer was already used; each works once. Retry the request in your app if it still needs authorization.")
		return
	}
	s.pending.done(st.Principal, s.o.Clock())
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: "", Path: callbackPath(s.redirect), MaxAge: -1, HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode})
	if e := q.Get("error"); e != "" {
		msg := "The authorization server did not grant access: " + e
		if d := q.Get("error_description"); d != "" {
			msg += " (" + d + ")"
		}
		s.refuse(w, r, http.StatusBadRequest, reasonDenied, msg+". Nothing was stored; retry the request in your app to try again.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	t, err := s.o.Client.Complete(ctx, &Flow{Data: cc.Flow}, q)
	if err != nil {
		s.o.Logger.Info("per-user authorization: code not redeemed", zap.String("upstream", s.o.Upstream), zap.Error(err))
		s.refuse(w, r, http.StatusBadGateway, reasonExchange, "The gateway could not complete this authorization at the authorization server of "+s.o.Upstream+" (the reason is in the gateway's log). Nothing was stored; retry the request in your app.")
		return
	}
	rec := s.newRecord(st.Principal, t, nil)
	rec.ElicitationFor = st.Elicitation
	if err := s.tokens.put(ctx, rec); err != nil {
		if errors.Is(err, ErrFull) {
			s.refuse(w, r, http.StatusServiceUnavailable, reasonStoreFull, "The gateway holds as many authorizations for "+s.o.Upstream+" as it is configured to, so yours was not stored. Tell the gateway's operator: "+err.Error())
			return
		}
		s.o.Logger.Warn("per-user token store: storing a token failed", zap.String("upstream", s.o.Upstream), zap.Error(err))
		s.refuse(w, r, http.StatusServiceUnavailable, reasonUnavailable, "The gateway could not store your authorization (its store failed). Retry the request in your app in a minute.")
		return
	}
	s.tokens.dropOld(ctx, st.Principal)
	s.count(ctx)
	s.failures.reset(st.Principal)
	s.o.Metrics.flow(s.o.Upstream, "completed")
	s.o.Logger.Info("per-user authorization stored", zap.String("upstream", s.o.Upstream), zap.String("principal", principalName(st.Principal)), zap.Time("expiry", rec.expiry()))
	// Naming the gateway user the account is now linked to lets someone
	// who was handed another user's link notice (and tell the operator).
	page(w, http.StatusOK, "Authorized", "The gateway can now use "+s.o.Upstream+" for you ("+principalName(st.Principal)+", as you are signed in to the gateway). You can close this window and return to your app. If that is not you, tell the gateway's operator.")
	if s.o.OnComplete != nil {
		s.o.OnComplete(st.Elicitation)
	}
}

// ServeRevoke is DELETE <public>/oauth/upstream/NAME/token, behind the
// downstream authentication: the caller drops their own token.
func (s *Source) ServeRevoke(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	if p == nil {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "authenticate with your gateway credentials to revoke your own token"})
		return
	}
	ok, err := s.Revoke(r.Context(), p.Key())
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "the token store is unavailable; retry"})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"upstream": s.o.Upstream, "revoked": ok})
}

// refuse answers a page request that cannot go on.
func (s *Source) refuse(w http.ResponseWriter, r *http.Request, status int, reason, msg string) {
	s.o.Metrics.refused(s.o.Upstream, reason)
	s.o.Logger.Debug("per-user authorization page refused", zap.String("upstream", s.o.Upstream), zap.String("reason", reason), zap.String("path", r.URL.Path))
	page(w, status, "Authorization failed", msg)
}

// pageHeaders keep the pages out of caches, frames and Referer headers
// (the link and the state are in their URLs).
func pageHeaders(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body><h1>{{.Title}}</h1><p>{{.Msg}}</p></body></html>
`))

func page(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, struct{ Title, Msg string }{title, msg})
}
