package oauthclient

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// oauthError is an OAuth error answer (RFC 6749 section 5.2).
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

// Begin starts an authorization of the subject at the upstream: it
// discovers the protected resource and its authorization server, registers
// (or reuses a registration), chooses the scopes and returns the flow
// whose AuthURL the user is sent to.
func (c *Client) Begin(ctx context.Context, r Request) (*Flow, error) {
	if r.RedirectURI == "" {
		return nil, c.fail("authorization", "no redirect URI")
	}
	d, ch, err := c.discover(ctx, r)
	if err != nil {
		return nil, err
	}
	prm, as, asURL := d.prm, d.as, d.asURL
	switch {
	case as.AuthorizationEndpoint == "":
		return nil, c.fail("discovery", "the authorization server metadata at %s names no authorization_endpoint", asURL)
	case SecureEndpoint(as.AuthorizationEndpoint) != nil:
		return nil, c.fail("discovery", "the authorization_endpoint %q in %s %v", as.AuthorizationEndpoint, asURL, SecureEndpoint(as.AuthorizationEndpoint))
	case !slices.Contains(as.CodeChallengeMethods, "S256"):
		// MCP authorization spec: without code_challenge_methods_supported
		// (or without S256 in it) PKCE is not known to be enforced, and
		// the client must refuse to proceed.
		return nil, c.fail("discovery", "the authorization server metadata at %s does not list S256 in code_challenge_methods_supported (it lists %q), so PKCE cannot be relied on; refusing to authorize with it", asURL, as.CodeChallengeMethods)
	}
	scopes, err := c.scopes(ch, prm, as, r.Previous, r.Scopes)
	if err != nil {
		return nil, err
	}
	reg, err := c.registration(ctx, as, r.RedirectURI)
	if err != nil {
		return nil, err
	}
	method := tokenAuthMethod(reg, as.TokenEndpointAuthMethods)
	if method == "" {
		return nil, c.fail("registration", "the authorization server %s accepts only %q at its token endpoint; mcpgw authenticates with %s or %s", as.Issuer, as.TokenEndpointAuthMethods, AuthMethodBasic, AuthMethodPost)
	}
	// RFC 8707: the resource exactly as the metadata publishes it.
	resource := prm.Resource
	state := r.State
	if state == "" {
		state = randomString(32)
	}
	verifier := randomString(32) // 43 characters (RFC 7636 section 4.1)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {reg.ClientID},
		"redirect_uri":          {r.RedirectURI},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"resource":              {resource},
	}
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	authURL, err := withQuery(as.AuthorizationEndpoint, q)
	if err != nil {
		return nil, c.fail("discovery", "the authorization_endpoint %q in %s: %v", as.AuthorizationEndpoint, asURL, err)
	}
	c.log.Debug("authorization begun", zap.String("upstream", c.cfg.Name), zap.String("issuer", as.Issuer), zap.String("resource", resource), zap.Strings("scopes", scopes))
	return &Flow{
		AuthURL: authURL, State: state, Verifier: verifier, RedirectURI: r.RedirectURI,
		IssRequired: as.AuthorizationResponseIssParam,
		Grant: Grant{
			Issuer: as.Issuer, TokenEndpoint: as.TokenEndpoint, ClientID: reg.ClientID, AuthMethod: method,
			Resource: resource, Scopes: scopes, RedirectURI: r.RedirectURI,
		},
	}, nil
}

// discovered is what Begin learnt of an upstream's authorization: the
// challenge a probe got, the protected resource's metadata and its
// authorization server's. It is kept a few minutes (discoveryTTL), so
// starting many authorizations costs the servers a few fetches, not
// three per start.
type discovered struct {
	probed []string // the probe's challenge (a Request without one)
	prm    *ResourceMetadata
	prmURL string
	as     *ServerMetadata
	asURL  string
	until  time.Time
}

const (
	// discoveryTTL is how long a discovery is reused.
	discoveryTTL = 5 * time.Minute
	// maxDiscoveries bounds the discoveries kept: one per upstream and
	// resource_metadata an upstream's challenges name.
	maxDiscoveries = 64
)

// discover finds r's protected resource and authorization server (or
// reuses a recent discovery of them), and the challenge to choose
// scopes by. With a pinned issuer (r.Issuer) a challenge's
// resource_metadata on another origin than the upstream is not fetched
// (the well-known URLs of the upstream are), and the resource must name
// the pinned server before its metadata is fetched: nothing an upstream
// names leads the gateway anywhere else.
func (c *Client) discover(ctx context.Context, r Request) (*discovered, Challenge, error) {
	if r.Issuer != "" {
		if err := SecureEndpoint(r.Issuer); err != nil {
			return nil, Challenge{}, c.fail("discovery", "the pinned authorization server %q %v", r.Issuer, err)
		}
	}
	probe := r.Challenge == nil && !r.NoProbe
	ch := ParseChallenge(r.Challenge)
	if r.Issuer != "" && ch.ResourceMetadata != "" && !sameOrigin(ch.ResourceMetadata, r.UpstreamURL) {
		c.log.Info("ignoring the upstream's resource_metadata on another origin: the authorization server is pinned", zap.String("upstream", c.cfg.Name))
		ch.ResourceMetadata = ""
	}
	key := r.UpstreamURL + "\x00" + r.Issuer + "\x00" + ch.ResourceMetadata
	if probe {
		key = r.UpstreamURL + "\x00" + r.Issuer + "\x00probe"
	}
	now := c.cfg.Now()
	c.discMu.Lock()
	d, ok := c.discoveries[key]
	c.discMu.Unlock()
	if ok && now.Before(d.until) {
		if probe {
			ch = c.pinnedChallenge(r, d.probed)
		}
		return d, ch, nil
	}
	d = &discovered{until: now.Add(discoveryTTL)}
	if probe {
		d.probed = c.probe(ctx, r.UpstreamURL)
		ch = c.pinnedChallenge(r, d.probed)
	}
	var err error
	d.prm, d.prmURL, err = c.disc.ProtectedResource(ctx, r.UpstreamURL, ch)
	if err != nil {
		return nil, ch, c.fail("discovery", "%v", err)
	}
	switch {
	case d.prm == nil:
		return nil, ch, c.fail("discovery", "the upstream published no protected resource metadata (asked %s), so there is no authorization server to discover", strings.Join(PRMCandidates(r.UpstreamURL, ch), ", "))
	case len(d.prm.AuthorizationServers) == 0:
		return nil, ch, c.fail("discovery", "the protected resource metadata at %s names no authorization_servers", d.prmURL)
	}
	// The first server the resource names (the spec leaves the choice to
	// the client), or the pinned one, which the resource must name.
	issuer := d.prm.AuthorizationServers[0]
	if r.Issuer != "" {
		if !slices.Contains(d.prm.AuthorizationServers, r.Issuer) {
			return nil, ch, c.fail("discovery", "the protected resource metadata at %s does not name the pinned authorization server %q; not authorizing elsewhere", d.prmURL, r.Issuer)
		}
		issuer = r.Issuer
	}
	d.as, d.asURL, err = c.disc.AuthorizationServer(ctx, issuer)
	if err != nil {
		return nil, ch, c.fail("discovery", "%v", err)
	}
	c.discMu.Lock()
	if len(c.discoveries) >= maxDiscoveries {
		for k, old := range c.discoveries {
			if !now.Before(old.until) || len(c.discoveries) >= maxDiscoveries {
				delete(c.discoveries, k)
			}
		}
	}
	c.discoveries[key] = d
	c.discMu.Unlock()
	return d, ch, nil
}

// ForgetDiscoveries drops every kept discovery, so that the next
// authorization discovers anew: an upstream that refused a token it was
// given may have moved to another authorization server (SEP-2352), which
// a kept discovery would hide for its whole life.
func (c *Client) ForgetDiscoveries() {
	c.discMu.Lock()
	clear(c.discoveries)
	c.discMu.Unlock()
}

// pinnedChallenge parses a probe's challenge, dropping (with a pinned
// issuer) a resource_metadata on another origin than the upstream.
func (c *Client) pinnedChallenge(r Request, values []string) Challenge {
	ch := ParseChallenge(values)
	if r.Issuer != "" && ch.ResourceMetadata != "" && !sameOrigin(ch.ResourceMetadata, r.UpstreamURL) {
		ch.ResourceMetadata = ""
	}
	return ch
}

// sameOrigin reports whether two URLs share scheme and host (with port).
func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}

// probeBody is the request that asks an upstream for its challenge: a
// ping, which a server that wants a token refuses with 401 before reading.
const probeBody = `{"jsonrpc":"2.0","id":"mcpgw-oauth-probe","method":"ping"}`

// probe sends the upstream an unauthenticated request and returns the
// WWW-Authenticate values of its 401 or 403; nil for any other answer (or
// none), so discovery falls back to the well-known URLs.
func (c *Client) probe(ctx context.Context, upstreamURL string) []string {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, upstreamURL, strings.NewReader(probeBody))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		c.log.Debug("upstream challenge probe failed", zap.String("upstream", c.cfg.Name), zap.Error(err))
		return nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxDocumentBytes))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	return resp.Header.Values("WWW-Authenticate")
}

// withQuery adds q to an endpoint URL, keeping the query it has (RFC 6749
// section 3.1).
func withQuery(endpoint string, q url.Values) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	have := u.Query()
	for k, v := range q {
		have[k] = v
	}
	u.RawQuery = have.Encode()
	return u.String(), nil
}

// scopes chooses what to ask for (MCP "Scope Selection Strategy"): the
// configured scopes, else the challenge's scope, else the resource's scopes_supported, else nothing;
// with the previous authorization's scopes added on re-authorization
// (SEP-2350), and offline_access where the server lists it and refresh
// tokens are wanted (SEP-2207, which forbids it otherwise).
func (c *Client) scopes(ch Challenge, prm *ResourceMetadata, as *ServerMetadata, previous, configured []string) ([]string, error) {
	if ch.InsufficientScope() && len(previous) > 0 && len(ch.Scopes) > 0 && containsAll(previous, ch.Scopes) {
		// Asking again for what was already asked for would loop: the
		// upstream's refusal stands.
		return nil, c.fail("authorization", "the upstream still refuses with insufficient_scope for %q, which the last authorization already asked for; not asking again", ch.Scopes)
	}
	var want []string
	switch {
	case len(configured) > 0:
		want = configured
	case len(ch.Scopes) > 0:
		want = ch.Scopes
	case len(prm.ScopesSupported) > 0:
		want = prm.ScopesSupported
	}
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range previous {
		add(s)
	}
	for _, s := range want {
		add(s)
	}
	if c.cfg.Offline && slices.Contains(as.ScopesSupported, ScopeOfflineAccess) {
		add(ScopeOfflineAccess)
	} else {
		out = slices.DeleteFunc(out, func(s string) bool { return s == ScopeOfflineAccess && !slices.Contains(as.ScopesSupported, s) })
	}
	if len(out) > c.cfg.MaxScopes {
		return nil, c.fail("authorization", "the upstream asks for %d scopes, more than the %d one authorization asks for", len(out), c.cfg.MaxScopes)
	}
	return out, nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// Complete checks the authorization response the callback received (query:
// its query parameters) against the flow and exchanges the code for
// tokens. The iss parameter (RFC 9207) is compared exactly with the
// issuer the flow began with whenever it is present, and required when
// the server advertised it; a response that fails is refused before the
// code goes anywhere.
func (c *Client) Complete(ctx context.Context, f *Flow, query url.Values) (*Token, error) {
	if f == nil {
		return nil, c.fail("authorization", "no flow")
	}
	if got := query.Get("state"); subtle.ConstantTimeCompare([]byte(got), []byte(f.State)) != 1 || got == "" {
		return nil, c.fail("authorization", "the authorization response's state does not match the flow's; refusing it")
	}
	iss, hasIss := query["iss"]
	switch {
	case hasIss && (len(iss) != 1 || iss[0] != f.Grant.Issuer):
		return nil, c.fail("authorization", "the authorization response's iss %q is not the authorization server the flow began with (%q); refusing it (RFC 9207: a mix-up attack, or a misconfigured server)", strings.Join(iss, ","), f.Grant.Issuer)
	case !hasIss && f.IssRequired:
		return nil, c.fail("authorization", "the authorization response has no iss, though %s advertises authorization_response_iss_parameter_supported; refusing it (RFC 9207)", f.Grant.Issuer)
	}
	if code := query.Get("error"); code != "" {
		e := c.fail("authorization", "the authorization server refused the authorization")
		e.Code, e.Description = code, query.Get("error_description")
		return nil, e
	}
	code := query.Get("code")
	if code == "" {
		return nil, c.fail("authorization", "the authorization response has no code")
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {f.RedirectURI},
		"code_verifier": {f.Verifier},
		"resource":      {f.Grant.Resource},
	}
	return c.token(ctx, "token", f.Grant, form)
}

// Refresh uses refreshToken for new tokens under g (the grant of the token
// it came with). An invalid_grant answer (IsInvalidGrant) means the
// subject must authorize again.
func (c *Client) Refresh(ctx context.Context, g Grant, refreshToken string) (*Token, error) {
	if refreshToken == "" {
		return nil, c.fail("refresh", "no refresh token")
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}, "resource": {g.Resource}}
	if len(g.Scopes) > 0 {
		form.Set("scope", strings.Join(g.Scopes, " "))
	}
	t, err := c.token(ctx, "refresh", g, form)
	if err == nil && t.RefreshToken == "" {
		t.RefreshToken = refreshToken // RFC 6749 section 6: the old one stays good
	}
	return t, err
}

// token POSTs form to g's token endpoint with the client's authentication.
func (c *Client) token(ctx context.Context, step string, g Grant, form url.Values) (*Token, error) {
	if err := SecureEndpoint(g.TokenEndpoint); err != nil {
		return nil, c.fail(step, "the token_endpoint %q %v", g.TokenEndpoint, err)
	}
	secret, known := c.secret(g)
	switch g.AuthMethod {
	case AuthMethodBasic, AuthMethodPost:
		if !known || secret == "" {
			e := c.fail(step, "the client %q registered with %s is no longer known (its secret is gone); authorize again", g.ClientID, g.Issuer)
			e.Reauthorize = true
			return nil, e
		}
	case AuthMethodNone:
	default:
		return nil, c.fail(step, "token endpoint authentication %q is not one mcpgw makes", g.AuthMethod)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	sent := c.cfg.Now()
	tr, err := PostToken(ctx, c.http, TokenPost{Endpoint: g.TokenEndpoint, ClientID: g.ClientID, Secret: secret, AuthMethod: g.AuthMethod, Form: form, DPoP: c.cfg.DPoP})
	if err != nil {
		return nil, c.fail(step, "POST %s: %v", g.TokenEndpoint, err)
	}
	if tr.Status != http.StatusOK {
		e := c.fail(step, "POST %s answered HTTP %d", g.TokenEndpoint, tr.Status)
		e.Code, e.Description = tr.Code, tr.Description
		return nil, e
	}
	switch {
	case tr.NotJSON != nil:
		return nil, c.fail(step, "the token answer of %s is %v", g.TokenEndpoint, tr.NotJSON)
	case tr.AccessToken == "":
		return nil, c.fail(step, "the token answer of %s has no access_token", g.TokenEndpoint)
	case c.cfg.DPoP != nil && !strings.EqualFold(tr.TokenType, TokenTypeDPoP):
		// Fail closed: an unbound token is a bearer token, which the
		// operator asked not to have (dpop: true).
		return nil, c.fail(step, "the token answer of %s is a %q token, not the DPoP-bound one asked for; the authorization server may not support DPoP (RFC 9449): remove dpop from the upstream's auth config to accept Bearer tokens", g.TokenEndpoint, tr.TokenType)
	case c.cfg.DPoP == nil && !strings.EqualFold(tr.TokenType, "Bearer"):
		return nil, c.fail(step, "the token answer of %s is a %q token; mcpgw sends Bearer tokens only (set dpop: true in the upstream's auth config for DPoP-bound tokens)", g.TokenEndpoint, tr.TokenType)
	}
	t := &Token{AccessToken: tr.AccessToken, RefreshToken: tr.RefreshToken, Scopes: g.Scopes, Grant: g}
	if tr.Scope != "" {
		t.Scopes = strings.Fields(tr.Scope)
	}
	if secs, ok := tr.Seconds(); ok {
		t.Expiry = sent.Add(time.Duration(secs) * time.Second)
	}
	return t, nil
}

// expiresIn reads expires_in as a number or a numeric string (some
// servers send one).
type expiresIn string

func (n *expiresIn) UnmarshalJSON(b []byte) error {
	*n = expiresIn(strings.Trim(string(b), `"`))
	return nil
}

func (n expiresIn) seconds() int64 {
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(n), 64)
		if ferr != nil || f < 0 || f > 1e9 {
			return 0
		}
		return int64(f)
	}
	if v < 0 || v > 1e9 {
		return 0
	}
	return v
}
