package login

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// serveToken is the token endpoint: authorization_code and refresh_token,
// for public clients (PKCE).
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "the token endpoint takes POST")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the form cannot be read")
		return
	}
	for k, v := range r.PostForm {
		if len(v) > 1 {
			oauthError(w, http.StatusBadRequest, "invalid_request", "the parameter "+k+" is given more than once")
			return
		}
	}
	f := r.PostForm
	switch f.Get("grant_type") {
	case "authorization_code":
		s.redeemCode(w, f.Get("code"), f.Get("client_id"), f.Get("redirect_uri"), f.Get("code_verifier"))
	case "refresh_token":
		s.refresh(w, f.Get("refresh_token"), f.Get("client_id"))
	default:
		s.met.request("token", "refused")
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

func (s *Server) tokenRefused(w http.ResponseWriter, reason, desc string) {
	if reason != "" {
		s.met.refusal(reason)
	}
	s.met.request("token", "refused")
	oauthError(w, http.StatusBadRequest, "invalid_grant", desc)
}

func (s *Server) redeemCode(w http.ResponseWriter, raw, clientID, redirect, verifier string) {
	now := s.now()
	h := hashToken(raw)
	s.mu.Lock()
	c := s.codes[h]
	if c == nil || raw == "" {
		s.mu.Unlock()
		s.tokenRefused(w, "code", "the code is unknown or expired")
		return
	}
	if c.used {
		fam := c.family
		c.replayed = true // a redemption still under way revokes what it makes
		s.mu.Unlock()
		// A code presented twice was stolen, or the client is broken:
		// whatever the first redemption issued is revoked.
		s.revokeFamily(fam)
		s.log.Warn("login: an authorization code was presented again; its tokens are revoked", zap.String("client_id", c.clientID), zap.String("sub", c.user.Subject))
		s.tokenRefused(w, "code_replay", "the code was already used; the tokens issued for it are revoked")
		return
	}
	c.used = true // one attempt, right or wrong
	s.mu.Unlock()
	switch {
	case now.After(c.expires):
		s.tokenRefused(w, "code", "the code expired")
		return
	case clientID != c.clientID:
		s.tokenRefused(w, "code", "the code was issued to another client")
		return
	case redirect != c.redirectURI:
		s.tokenRefused(w, "redirect_uri", "redirect_uri differs from the authorization request's")
		return
	case !pkceOK(verifier, c.challenge):
		s.tokenRefused(w, "pkce", "code_verifier does not match the code_challenge")
		return
	}
	fam := &family{ID: randomToken(18), ClientID: c.clientID, Resource: c.resource, Scopes: c.scopes, User: c.user, Expires: now.Add(s.cfg.RefreshTokenTTL.D())}
	refresh := randomToken(32)
	fam.Current = hashToken(refresh)
	st := s.store
	st.mu.Lock()
	st.trimUser(fam.User.Subject, s.cfg.MaxGrantsPerUser-1)
	if len(st.st.Families) >= s.cfg.MaxGrants {
		st.sweep(now, s.cfg.ClientIdleExpiry.D())
	}
	if len(st.st.Families) >= s.cfg.MaxGrants {
		st.mu.Unlock()
		s.met.refusal("max_grants")
		s.met.request("token", "refused")
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the gateway keeps login.max_grants grants and has no room for another; ask the administrator to raise login.max_grants")
		return
	}
	st.st.Families[fam.ID] = fam
	st.index(fam.ID, fam)
	err := st.save()
	st.mu.Unlock()
	if err != nil {
		s.revokeFamily(fam.ID)
		s.log.Error("login: cannot write the state file", zap.Error(err))
		oauthError(w, http.StatusInternalServerError, "server_error", "the gateway cannot keep the grant (its state file cannot be written)")
		return
	}
	s.mu.Lock()
	c.family = fam.ID
	replayed := c.replayed
	s.mu.Unlock()
	if replayed {
		s.revokeFamily(fam.ID)
		s.tokenRefused(w, "code_replay", "the code was presented twice at once; the tokens issued for it are revoked")
		return
	}
	s.gauges()
	s.answerTokens(w, fam, refresh)
}

func pkceOK(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

func (s *Server) refresh(w http.ResponseWriter, raw, clientID string) {
	now := s.now()
	h := hashToken(raw)
	st := s.store
	st.mu.Lock()
	id, ok := st.byRefresh[h]
	fam := st.st.Families[id]
	if !ok || fam == nil || raw == "" {
		st.mu.Unlock()
		s.tokenRefused(w, "refresh", "the refresh token is unknown, revoked or expired")
		return
	}
	if fam.Current != h {
		// A replaced token came back: two parties hold this grant. The
		// whole family ends (RFC 9700 section 4.14.2).
		st.unindex(fam)
		delete(st.st.Families, id)
		_ = st.save()
		st.mu.Unlock()
		s.gauges()
		s.log.Warn("login: a used refresh token was presented again; the grant is revoked", zap.String("client_id", fam.ClientID), zap.String("sub", fam.User.Subject))
		s.tokenRefused(w, "refresh_reuse", "the refresh token was already used; every token of this grant is revoked, sign in again")
		return
	}
	if clientID != fam.ClientID || now.After(fam.Expires) {
		st.mu.Unlock()
		s.tokenRefused(w, "refresh", "the refresh token is unknown, revoked or expired")
		return
	}
	next := randomToken(32)
	fam.Used = append(fam.Used, fam.Current)
	if len(fam.Used) > maxUsedPerFamily {
		delete(st.byRefresh, fam.Used[0])
		fam.Used = slices.Delete(fam.Used, 0, 1)
	}
	fam.Current = hashToken(next)
	st.byRefresh[fam.Current] = id
	err := st.save()
	cp := *fam
	st.mu.Unlock()
	if err != nil {
		s.log.Error("login: cannot write the state file", zap.Error(err))
		oauthError(w, http.StatusInternalServerError, "server_error", "the gateway cannot keep the new refresh token (its state file cannot be written)")
		return
	}
	s.touchClient(cp.ClientID)
	s.answerTokens(w, &cp, next)
}

// answerTokens issues an access token for fam and answers with it and
// the refresh token.
func (s *Server) answerTokens(w http.ResponseWriter, fam *family, refresh string) {
	now := s.now()
	ttl := s.cfg.AccessTokenTTL.D()
	claims := map[string]any{
		"iss":       s.issuer,
		"sub":       fam.User.Subject,
		"aud":       fam.Resource,
		"iat":       now.Unix(),
		"nbf":       now.Unix(),
		"exp":       now.Add(ttl).Unix(),
		"jti":       randomToken(12),
		"client_id": fam.ClientID,
		"scope":     strings.Join(fam.Scopes, " "),
		"idp":       fam.User.Issuer,
		"fid":       fam.ID, // the grant: revoking it ends this token too (auth.LocalIssuer.Active)
	}
	if len(fam.User.Groups) > 0 {
		claims["groups"] = fam.User.Groups
	}
	if fam.User.Email != "" {
		claims["email"] = fam.User.Email
	}
	if fam.User.Name != "" {
		claims["name"] = fam.User.Name
	}
	if fam.User.Username != "" {
		claims["preferred_username"] = fam.User.Username
	}
	payload, _ := json.Marshal(claims)
	at, err := s.keys.sign(payload)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "cannot sign the token")
		return
	}
	s.met.request("token", "ok")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	out := map[string]any{
		"access_token":  at,
		"token_type":    "Bearer",
		"expires_in":    int(ttl.Seconds()),
		"refresh_token": refresh,
	}
	if len(fam.Scopes) > 0 {
		out["scope"] = strings.Join(fam.Scopes, " ")
	}
	_ = json.NewEncoder(w).Encode(out)
}

// Active reports whether the grant id stands (auth.LocalIssuer.Active):
// an access token dies with its grant.
func (s *Server) Active(id string) bool {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	f := s.store.st.Families[id]
	return f != nil && !s.now().After(f.Expires)
}

// revokeFamily ends a grant.
func (s *Server) revokeFamily(id string) {
	if id == "" {
		return
	}
	st := s.store
	st.mu.Lock()
	if f := st.st.Families[id]; f != nil {
		st.unindex(f)
		delete(st.st.Families, id)
		_ = st.save()
	}
	st.mu.Unlock()
	s.gauges()
}

// serveRevoke is RFC 7009: a refresh token ends its family; the answer is
// 200 whatever the token (an access token lives out its short life).
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "revocation takes POST")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the form cannot be read")
		return
	}
	h := hashToken(r.PostForm.Get("token"))
	st := s.store
	st.mu.Lock()
	id := st.byRefresh[h]
	f := st.st.Families[id]
	st.mu.Unlock()
	if f != nil && (r.PostForm.Get("client_id") == "" || r.PostForm.Get("client_id") == f.ClientID) {
		s.revokeFamily(id)
	}
	s.met.request("revoke", "ok")
	w.WriteHeader(http.StatusOK)
}
