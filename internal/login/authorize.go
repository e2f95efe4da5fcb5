package login

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/internal/config"
)

// pendingTTL bounds a sign-in under way (provider and consent page).
const pendingTTL = 10 * time.Minute

// codeTTL is an authorization code's life.
const codeTTL = time.Minute

// pending is an authorization (or a plain sign-in) under way.
type pending struct {
	id      string
	created time.Time
	// The client's request; clientID is empty for a sign-in without a
	// client (SignIn), which returns to returnTo.
	clientID, clientName, redirectURI, state, challenge, resource string
	scopes                                                        []string
	returnTo                                                      string
	src                                                           string // the address that began it (max_pending_per_source)
	// At the provider.
	provState, nonce, verifier string
	// After the sign-in: whose consent the page asks.
	user *User
}

// code is an issued authorization code, kept by hash.
type code struct {
	clientID, redirectURI, challenge, resource string
	scopes                                     []string
	user                                       User
	expires                                    time.Time
	used                                       bool
	replayed                                   bool   // presented again while or after it was redeemed
	family                                     string // the family its redemption began
}

// authzError is an error the client's redirect URI may carry.
type authzError struct{ code, desc string }

func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.page(w, http.StatusMethodNotAllowed, "Method not allowed", "The authorization endpoint takes GET.")
		return
	}
	q := r.URL.Query()
	for k, v := range q {
		if len(v) > 1 {
			s.met.refusal("duplicate_parameter")
			s.page(w, http.StatusBadRequest, "Authorization refused", "The parameter "+k+" is given more than once; each is read once, so the request is refused.")
			return
		}
	}
	c, msg := s.lookupClient(r.Context(), q.Get("client_id"))
	if c == nil {
		s.met.request("authorize", "refused")
		s.page(w, http.StatusBadRequest, "Unknown client", msg)
		return
	}
	redirect, ok := matchRedirect(c, q.Get("redirect_uri"))
	if !ok {
		s.met.request("authorize", "refused")
		s.met.refusal("redirect_uri")
		s.page(w, http.StatusBadRequest, "Authorization refused", "The redirect_uri "+q.Get("redirect_uri")+" is not one registered for the client "+c.Name+"; the gateway sends codes only to registered addresses (exact match; any port on a loopback address).")
		return
	}
	state := q.Get("state")
	fail := func(e authzError) {
		s.met.request("authorize", "refused")
		s.redirectError(w, r, redirect, state, e)
	}
	if q.Get("response_type") != "code" {
		fail(authzError{"unsupported_response_type", "response_type must be code"})
		return
	}
	challenge, method := q.Get("code_challenge"), q.Get("code_challenge_method")
	if challenge == "" || method != "S256" {
		s.met.refusal("pkce")
		fail(authzError{"invalid_request", "PKCE is required with code_challenge_method=S256 (plain is refused)"})
		return
	}
	if len(challenge) != 43 || strings.Trim(challenge, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		s.met.refusal("pkce")
		fail(authzError{"invalid_request", "code_challenge is not a base64url SHA-256 (43 characters)"})
		return
	}
	resource, scopes, e := s.target(q.Get("resource"), q.Get("scope"))
	if e != nil {
		fail(*e)
		return
	}
	p := &pending{clientID: c.ID, clientName: c.Name, redirectURI: redirect, state: state, challenge: challenge, resource: resource, scopes: scopes}
	if bs := s.session(r); bs != nil {
		// Signed in already: straight to consent.
		u := bs.User
		p.user = &u
		if !s.addPending(w, p, sourceAddress(r)) {
			return
		}
		s.afterSignIn(w, r, p)
		return
	}
	s.toProvider(w, r, p)
}

// target checks resource and scope: resource must be a route's (or is
// the only route's when absent); the scopes granted are those asked that
// the gateway knows, plus every scope the route requires.
func (s *Server) target(resource, scope string) (string, []string, *authzError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if resource == "" {
		if len(s.routes) != 1 {
			return "", nil, &authzError{"invalid_target", "resource is required: name the route's URL (RFC 8707)"}
		}
		for res := range s.routes {
			resource = res
		}
	}
	ri, ok := s.routes[resource]
	if !ok {
		// A client that made a URL of the route's resource may add or
		// drop the root's trailing slash (WHATWG URL serialization).
		for _, alt := range []string{resource + "/", strings.TrimSuffix(resource, "/")} {
			if x, found := s.routes[alt]; found && strings.Count(alt, "/") <= 3 {
				resource, ri, ok = alt, x, true
				break
			}
		}
	}
	if !ok {
		return "", nil, &authzError{"invalid_target", "resource " + resource + " is not a route of this gateway"}
	}
	known := map[string]bool{}
	for _, x := range s.routes {
		for _, sc := range x.scopes {
			known[sc] = true
		}
	}
	var out []string
	for _, sc := range strings.Fields(scope) {
		if known[sc] && !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	for _, sc := range ri.scopes {
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return resource, out, nil
}

// addPending keeps p, begun from source address src, within
// login.max_pending and login.max_pending_per_source: sign-ins are begun
// without any credential, so one address beginning them without end
// must not take every place.
func (s *Server) addPending(w http.ResponseWriter, p *pending, src string) bool {
	now := s.now()
	s.mu.Lock()
	if len(s.pending) >= s.cfg.MaxPending || s.pendingBySrc[src] >= s.cfg.MaxPendingPerSource {
		for id, x := range s.pending {
			if now.Sub(x.created) > pendingTTL {
				s.removePendingLocked(id)
			}
		}
	}
	if len(s.pending) >= s.cfg.MaxPending {
		s.mu.Unlock()
		s.met.refusal("max_pending")
		s.page(w, http.StatusServiceUnavailable, "Too many sign-ins under way", "The gateway has login.max_pending sign-ins under way; try again in a few minutes, or raise login.max_pending.")
		return false
	}
	if s.pendingBySrc[src] >= s.cfg.MaxPendingPerSource {
		s.mu.Unlock()
		s.met.refusal("max_pending_per_source")
		w.Header().Set("Retry-After", "600")
		s.page(w, http.StatusTooManyRequests, "Too many sign-ins under way", "This address has login.max_pending_per_source sign-ins under way; finish or abandon them (they expire after 10 minutes), or ask the administrator to raise login.max_pending_per_source (e.g. behind a proxy all users share one address).")
		return false
	}
	p.id, p.created, p.src = randomToken(24), now, src
	s.pending[p.id] = p
	s.pendingBySrc[src]++
	s.mu.Unlock()
	s.gauges()
	return true
}

// removePendingLocked forgets the pending authorization id; the caller
// holds mu.
func (s *Server) removePendingLocked(id string) {
	p := s.pending[id]
	if p == nil {
		return
	}
	delete(s.byState, p.provState)
	delete(s.pending, id)
	if s.pendingBySrc[p.src]--; s.pendingBySrc[p.src] <= 0 {
		delete(s.pendingBySrc, p.src)
	}
}

// toProvider sends the browser to the provider's authorization endpoint.
func (s *Server) toProvider(w http.ResponseWriter, r *http.Request, p *pending) {
	m, err := s.prov.metadata(r.Context())
	if err != nil {
		s.log.Warn("login: the sign-in provider is unavailable", zap.Error(err))
		s.met.request("authorize", "error")
		s.page(w, http.StatusServiceUnavailable, "Sign-in unavailable", err.Error())
		return
	}
	p.provState, p.nonce, p.verifier = randomToken(24), randomToken(24), oauth2.GenerateVerifier()
	if !s.addPending(w, p, sourceAddress(r)) {
		return
	}
	s.mu.Lock()
	s.byState[p.provState] = p.id
	s.mu.Unlock()
	scopes := slices.Clone(s.cfg.Provider.Scopes)
	for _, sc := range p.scopes {
		for _, extra := range s.cfg.Provider.ScopeMap[sc] {
			if !slices.Contains(scopes, extra) {
				scopes = append(scopes, extra)
			}
		}
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(p.verifier), oauth2.SetAuthURLParam("nonce", p.nonce)}
	if s.cfg.Provider.Prompt != "" {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", s.cfg.Provider.Prompt))
	}
	if s.cfg.Provider.SendResource && p.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", p.resource))
	}
	fc, _ := json.Marshal(flowCookie{Pending: p.id, State: p.provState, Expires: s.now().Add(pendingTTL).Unix()})
	s.setCookie(w, FlowCookie, s.keys.seal(fc, FlowCookie), pendingTTL)
	http.Redirect(w, r, s.prov.oauth2Config(m, s.issuer+config.LoginCallbackPath, scopes).AuthCodeURL(p.provState, opts...), http.StatusFound)
}

// serveCallback takes the provider's answer.
func (s *Server) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st := q.Get("state")
	// The state is single use and bound to the browser that began the
	// sign-in (its flow cookie): a replayed or forwarded callback finds
	// nothing.
	var fc flowCookie
	if c, err := r.Cookie(FlowCookie); err == nil {
		if b, ok := s.keys.open(c.Value, FlowCookie); ok {
			_ = json.Unmarshal(b, &fc)
		}
	}
	s.mu.Lock()
	id, known := s.byState[st]
	var p *pending
	if known && fc.State == st && fc.Pending == id && s.now().Unix() <= fc.Expires {
		p = s.pending[id]
		delete(s.byState, st)
	}
	s.mu.Unlock()
	if p == nil || st == "" {
		s.met.request("callback", "refused")
		s.met.refusal("state")
		s.page(w, http.StatusBadRequest, "Sign-in refused", "This sign-in answer is unknown, already used, expired, or was begun in another browser. Start again from your application.")
		return
	}
	s.setCookie(w, FlowCookie, "", 0)
	if e := q.Get("error"); e != "" {
		s.dropPending(p.id)
		s.met.request("callback", "refused")
		if p.clientID == "" {
			s.page(w, http.StatusForbidden, "Sign-in failed", "The sign-in provider answered "+e+": "+q.Get("error_description"))
			return
		}
		code := "access_denied"
		if e != "access_denied" && e != "login_required" && e != "consent_required" && e != "interaction_required" {
			code = "server_error"
		}
		s.redirectError(w, r, p.redirectURI, p.state, authzError{code, "the sign-in provider answered " + e})
		return
	}
	m, err := s.prov.metadata(r.Context())
	if err != nil {
		s.dropPending(p.id)
		s.page(w, http.StatusServiceUnavailable, "Sign-in unavailable", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), oauth2.HTTPClient, s.prov.client), providerTimeout)
	defer cancel()
	tok, err := s.prov.oauth2Config(m, s.issuer+config.LoginCallbackPath, nil).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(p.verifier))
	if err != nil {
		s.dropPending(p.id)
		s.log.Warn("login: the provider refused the code", zap.Error(err))
		s.met.request("callback", "error")
		s.page(w, http.StatusBadGateway, "Sign-in failed", "The sign-in provider did not accept the sign-in: "+err.Error())
		return
	}
	u, err := s.prov.identity(ctx, m, tok, p.nonce)
	if err != nil {
		s.dropPending(p.id)
		s.met.request("callback", "error")
		s.page(w, http.StatusBadGateway, "Sign-in failed", err.Error())
		return
	}
	if _, ok := s.startSession(w, u); !ok {
		s.dropPending(p.id)
		s.page(w, http.StatusBadRequest, "Sign-in refused", "Your account's groups do not fit in a sign-in cookie; ask the administrator to send fewer groups (a group filter at the provider, or login.provider.groups_claim).")
		return
	}
	s.met.request("callback", "ok")
	if p.clientID == "" {
		s.dropPending(p.id)
		http.Redirect(w, r, p.returnTo, http.StatusSeeOther)
		return
	}
	s.mu.Lock()
	p.user = u // others read it under mu (pendingFor)
	s.mu.Unlock()
	s.afterSignIn(w, r, p)
}

func (s *Server) dropPending(id string) {
	s.mu.Lock()
	s.removePendingLocked(id)
	s.mu.Unlock()
	s.gauges()
}

// afterSignIn asks for consent unless the user gave it to this client
// for this route and these scopes before.
func (s *Server) afterSignIn(w http.ResponseWriter, r *http.Request, p *pending) {
	s.store.mu.Lock()
	remembered := s.store.findConsent(p.user.Subject, p.clientID, p.resource, p.scopes) != nil
	s.store.mu.Unlock()
	if remembered {
		s.dropPending(p.id)
		s.issueCode(w, r, p)
		return
	}
	http.Redirect(w, r, s.issuer+"/oauth/consent?request="+url.QueryEscape(p.id), http.StatusSeeOther)
}

// serveConsent shows (GET) and takes (POST) the consent form.
func (s *Server) serveConsent(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		bs := s.session(r)
		p := s.pendingFor(r.URL.Query().Get("request"), bs)
		if p == nil {
			s.met.refusal("consent_request")
			s.page(w, http.StatusBadRequest, "Nothing to approve", "This approval is unknown, expired, already answered, or belongs to another browser session. Start again from your application.")
			return
		}
		s.consentPage(w, p, bs)
	case http.MethodPost:
		bs, ok := s.checkForm(w, r)
		if !ok {
			return
		}
		p := s.takePending(r.PostForm.Get("request"), bs) // answered once
		if p == nil {
			s.met.refusal("consent_request")
			s.page(w, http.StatusBadRequest, "Nothing to approve", "This approval is unknown, expired, already answered, or belongs to another browser session. Start again from your application.")
			return
		}
		switch r.PostForm.Get("decision") {
		case "allow":
			if !s.remember(w, p) {
				return
			}
			s.met.request("consent", "ok")
			s.issueCode(w, r, p)
		default:
			s.met.request("consent", "refused")
			s.redirectError(w, r, p.redirectURI, p.state, authzError{"access_denied", "the user denied the request"})
		}
	default:
		s.page(w, http.StatusMethodNotAllowed, "Method not allowed", "Use GET or POST.")
	}
}

// pendingFor returns the pending authorization id, if it awaits consent
// from the user of bs.
func (s *Server) pendingFor(id string, bs *browserSession) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pendingLocked(id, bs)
}

// takePending is pendingFor that also removes it, in one step: of two
// answers posted at once, one finds it.
func (s *Server) takePending(id string, bs *browserSession) *pending {
	s.mu.Lock()
	p := s.pendingLocked(id, bs)
	if p != nil {
		s.removePendingLocked(id)
	}
	s.mu.Unlock()
	s.gauges()
	return p
}

func (s *Server) pendingLocked(id string, bs *browserSession) *pending {
	if bs == nil || id == "" {
		return nil
	}
	p := s.pending[id]
	if p == nil || p.user == nil || p.user.Subject != bs.User.Subject || p.user.Issuer != bs.User.Issuer || s.now().Sub(p.created) > pendingTTL {
		return nil
	}
	return p
}

// checkForm accepts a POST of the gateway's own pages: same-origin
// (Origin and Sec-Fetch-Site when sent), with the session's csrf token.
// Anything else is refused with 403 and changes nothing.
func (s *Server) checkForm(w http.ResponseWriter, r *http.Request) (*browserSession, bool) {
	if r.Method != http.MethodPost {
		s.page(w, http.StatusMethodNotAllowed, "Method not allowed", "Use POST.")
		return nil, false
	}
	if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, s.origin) {
		s.met.refusal("cross_site")
		s.page(w, http.StatusForbidden, "Refused", "This form was posted from another site ("+o+"); the gateway accepts its forms only from its own pages.")
		return nil, false
	}
	if site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); site == "cross-site" || site == "same-site" {
		s.met.refusal("cross_site")
		s.page(w, http.StatusForbidden, "Refused", "This form was posted from another site; the gateway accepts its forms only from its own pages.")
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.page(w, http.StatusBadRequest, "Refused", "The form cannot be read.")
		return nil, false
	}
	bs := s.session(r)
	if bs == nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(bs.CSRF)) != 1 {
		s.met.refusal("csrf")
		s.page(w, http.StatusForbidden, "Refused", "This form does not belong to your sign-in session (it may be old, or from another site). Start again from your application.")
		return nil, false
	}
	return bs, true
}

// remember keeps the user's consent (within login.max_grants).
func (s *Server) remember(w http.ResponseWriter, p *pending) bool {
	st := s.store
	st.mu.Lock()
	kept := st.st.Consents[:0]
	for _, c := range st.st.Consents {
		if !(c.Subject == p.user.Subject && c.ClientID == p.clientID && c.Resource == p.resource) {
			kept = append(kept, c)
		}
	}
	st.st.Consents = kept
	if len(st.st.Consents) >= s.cfg.MaxGrants {
		st.mu.Unlock()
		s.met.refusal("max_grants")
		s.page(w, http.StatusServiceUnavailable, "Cannot approve", "The gateway keeps login.max_grants approvals and has no room for another; ask the administrator to raise login.max_grants.")
		return false
	}
	st.st.Consents = append(st.st.Consents, &consent{Subject: p.user.Subject, ClientID: p.clientID, Resource: p.resource, Scopes: slices.Clone(p.scopes), Granted: s.now()})
	err := st.save()
	st.mu.Unlock()
	if err != nil {
		s.log.Error("login: cannot write the state file", zap.Error(err))
		s.page(w, http.StatusInternalServerError, "Cannot approve", "The gateway cannot write its state file; see its log.")
		return false
	}
	s.gauges()
	return true
}

// issueCode sends the browser back to the client with a fresh code.
func (s *Server) issueCode(w http.ResponseWriter, r *http.Request, p *pending) {
	now := s.now()
	raw := randomToken(32)
	s.mu.Lock()
	if len(s.codes) >= s.cfg.MaxPending {
		for h, c := range s.codes {
			if now.After(c.expires) {
				delete(s.codes, h)
			}
		}
	}
	if len(s.codes) >= s.cfg.MaxPending {
		s.mu.Unlock()
		s.met.refusal("max_pending")
		s.redirectError(w, r, p.redirectURI, p.state, authzError{"temporarily_unavailable", "too many unredeemed codes (login.max_pending)"})
		return
	}
	s.codes[hashToken(raw)] = &code{clientID: p.clientID, redirectURI: p.redirectURI, challenge: p.challenge, resource: p.resource, scopes: p.scopes, user: *p.user, expires: now.Add(codeTTL)}
	s.mu.Unlock()
	s.gauges()
	s.touchClient(p.clientID)
	v := url.Values{"code": {raw}, "iss": {s.issuer}}
	if p.state != "" {
		v.Set("state", p.state)
	}
	http.Redirect(w, r, withQuery(p.redirectURI, v), http.StatusSeeOther)
}

// redirectError sends the browser back to the client with an error
// (RFC 6749 section 4.1.2.1, with iss per RFC 9207).
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, redirect, state string, e authzError) {
	v := url.Values{"error": {e.code}, "error_description": {e.desc}, "iss": {s.issuer}}
	if state != "" {
		v.Set("state", state)
	}
	http.Redirect(w, r, withQuery(redirect, v), http.StatusSeeOther)
}

func withQuery(base string, v url.Values) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}
