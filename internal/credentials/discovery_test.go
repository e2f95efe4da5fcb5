package credentials

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// oauthWorld is an OAuth-protected upstream with its protected resource
// metadata, and an authorization server with its metadata and token
// endpoint, all adjustable per test. It records every request.
type oauthWorld struct {
	t  *testing.T
	mu sync.Mutex
	// upstream
	up            *httptest.Server
	challenge     string            // WWW-Authenticate of a 401 ("" = none)
	need          map[string]string // method → scope its requests need (403 insufficient_scope otherwise)
	prm           map[string]string // path → PRM document ({{AS}} and {{UP}} replaced)
	tokenScopes   map[string]string // access token → scope it was issued for
	seen          []string          // "METHOD path auth"
	tokenRequests []string          // each token request's client auth and form
	// authorization server
	as       *httptest.Server
	asDocs   map[string]string // path → metadata ({{AS}} replaced)
	asIssued int
}

func newOAuthWorld(t *testing.T) *oauthWorld {
	w := &oauthWorld{t: t, need: map[string]string{}, prm: map[string]string{}, asDocs: map[string]string{}, tokenScopes: map[string]string{}}
	w.as = httptest.NewServer(http.HandlerFunc(w.serveAS))
	t.Cleanup(w.as.Close)
	w.up = httptest.NewServer(http.HandlerFunc(w.serveUpstream))
	t.Cleanup(w.up.Close)
	return w
}

func (w *oauthWorld) fill(s string) string {
	return strings.NewReplacer("{{AS}}", w.as.URL, "{{UP}}", w.up.URL, "{{UPQ}}", url.QueryEscape(w.up.URL)).Replace(s)
}

func (w *oauthWorld) serveAS(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Method == http.MethodPost && r.URL.Path == "/token" {
		_ = r.ParseForm()
		id, secret, basic := r.BasicAuth()
		w.tokenRequests = append(w.tokenRequests, fmt.Sprintf("basic=%v:%s:%s form=%s", basic, id, secret, r.PostForm.Encode()))
		w.asIssued++
		tok := fmt.Sprintf("tok-%d", w.asIssued)
		// mcp:admin is never granted, whoever asks.
		w.tokenScopes[tok] = strings.ReplaceAll(r.PostForm.Get("scope"), "mcp:admin", "")
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tok)
		return
	}
	w.seen = append(w.seen, "AS GET "+r.URL.Path)
	doc, ok := w.asDocs[r.URL.Path]
	if !ok {
		http.NotFound(rw, r)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	fmt.Fprint(rw, w.fill(doc))
}

func (w *oauthWorld) serveUpstream(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/.well-known/") || strings.HasPrefix(r.URL.Path, "/meta") {
		w.seen = append(w.seen, "UP GET "+r.URL.Path)
		doc, ok := w.prm[r.URL.Path]
		if !ok {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, w.fill(doc))
		return
	}
	auth := r.Header.Get("Authorization")
	method := r.Header.Get("X-Method")
	w.seen = append(w.seen, fmt.Sprintf("UP %s %s", method, auth))
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	granted, known := w.tokenScopes[tok]
	switch {
	case !ok || !known:
		if w.challenge != "" {
			rw.Header().Set("WWW-Authenticate", w.fill(w.challenge))
		}
		rw.WriteHeader(http.StatusUnauthorized)
	case w.need[method] != "" && !strings.Contains(" "+granted+" ", " "+w.need[method]+" "):
		rw.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata="%s/meta"`, w.need[method], w.up.URL))
		rw.WriteHeader(http.StatusForbidden)
	default:
		fmt.Fprint(rw, "ok")
	}
}

// do sends one request (named by X-Method) through the upstream's OAuth
// client and returns the status or the error.
func (w *oauthWorld) do(ctx context.Context, hc *http.Client, method string) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.up.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0"}`))
	req.Header.Set("X-Method", method)
	resp, err := hc.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	resp.Body.Close()
	return fmt.Sprint(resp.StatusCode)
}

func (w *oauthWorld) log() (seen, tokens []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...), append([]string(nil), w.tokenRequests...)
}

const (
	prmDoc   = `{"resource":"{{UP}}/mcp","authorization_servers":["{{AS}}"],"scopes_supported":["mcp:read","mcp:write"]}`
	asDoc    = `{"issuer":"{{AS}}","token_endpoint":"{{AS}}/token","grant_types_supported":["client_credentials"],"token_endpoint_auth_methods_supported":["client_secret_post"]}`
	wellPRM  = "/.well-known/oauth-protected-resource/mcp"
	wellAS   = "/.well-known/oauth-authorization-server"
	withMeta = `Bearer realm="mcp", scope="mcp:read", resource_metadata="{{UP}}/meta"`
)

// TestOAuthDiscovery: with oauth.discover or oauth.issuer the gateway sends
// its first request without a token, and on the 401 follows the MCP
// authorization discovery — the challenge's resource_metadata (else the
// RFC 9728 well-known URLs, path first), the authorization server's RFC
// 8414 metadata (else OpenID Connect's) — checking each answer before
// using it; it asks for the resource exactly as published and the scopes
// the challenge names (else scopes_supported, else none), authenticating
// as the server's metadata allows, and sends the request once more.
func TestOAuthDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name      string
		oauth     config.UpstreamOAuth // ClientID/Secret filled in; Issuer "{{AS}}" replaced
		challenge string
		prm       map[string]string
		as        map[string]string
		want      string // the first request's outcome
		fetches   string // the metadata requests, in order
		token     string // the token request ("" = none was made)
		noAllow   bool   // discover without allow_addresses: 127.0.0.1 (the AS) is refused
	}{
		{
			name: "challenge names the metadata and the scope", oauth: config.UpstreamOAuth{Discover: true},
			challenge: withMeta, prm: map[string]string{"/meta": prmDoc}, as: map[string]string{wellAS: asDoc},
			want: "200", fetches: "UP GET /meta, AS GET " + wellAS,
			token: "basic=false:: form=client_id=cid&client_secret=sec&grant_type=client_credentials&resource={{UPQ}}%2Fmcp&scope=mcp%3Aread",
		},
		{
			name: "well-known path-based metadata, scopes_supported, basic by default", oauth: config.UpstreamOAuth{Discover: true},
			challenge: `Bearer error="invalid_token"`, prm: map[string]string{wellPRM: prmDoc, "/.well-known/oauth-protected-resource": `{"resource":"https://trap"}`},
			as:   map[string]string{wellAS: `{"issuer":"{{AS}}","token_endpoint":"{{AS}}/token"}`},
			want: "200", fetches: "UP GET " + wellPRM + ", AS GET " + wellAS,
			token: "basic=true:cid:sec form=grant_type=client_credentials&resource={{UPQ}}%2Fmcp&scope=mcp%3Aread+mcp%3Awrite",
		},
		{
			name: "root metadata for a resource above the path; no scopes anywhere", oauth: config.UpstreamOAuth{Discover: true},
			prm:  map[string]string{"/.well-known/oauth-protected-resource": `{"resource":"{{UP}}","authorization_servers":["{{AS}}"]}`},
			as:   map[string]string{wellAS: asDoc},
			want: "200", fetches: "UP GET " + wellPRM + ", UP GET /.well-known/oauth-protected-resource, AS GET " + wellAS,
			token: "basic=false:: form=client_id=cid&client_secret=sec&grant_type=client_credentials&resource={{UPQ}}",
		},
		{
			name: "pinned issuer, OpenID Connect discovery, configured scopes win", oauth: config.UpstreamOAuth{Issuer: "{{AS}}", Scopes: []string{"cfg"}},
			challenge: withMeta, prm: map[string]string{"/meta": prmDoc},
			as:   map[string]string{"/.well-known/openid-configuration": asDoc},
			want: "200", fetches: "UP GET /meta, AS GET " + wellAS + ", AS GET /.well-known/openid-configuration",
			token: "basic=false:: form=client_id=cid&client_secret=sec&grant_type=client_credentials&resource={{UPQ}}%2Fmcp&scope=cfg",
		},
		{
			name: "pinned issuer, upstream without metadata", oauth: config.UpstreamOAuth{Issuer: "{{AS}}"},
			challenge: `Bearer scope="a b"`, as: map[string]string{wellAS: asDoc},
			want: "200", fetches: "UP GET " + wellPRM + ", UP GET /.well-known/oauth-protected-resource, AS GET " + wellAS,
			token: "basic=false:: form=client_id=cid&client_secret=sec&grant_type=client_credentials&resource={{UPQ}}%2Fmcp&scope=a+b",
		},
		{
			name: "resource of another server is refused", oauth: config.UpstreamOAuth{Discover: true},
			challenge: withMeta, prm: map[string]string{"/meta": `{"resource":"https://evil.example.com/mcp","authorization_servers":["{{AS}}"]}`},
			as:   map[string]string{wellAS: asDoc},
			want: `error: Post "{{UP}}/mcp": upstream "up": OAuth discovery failed: the protected resource metadata at {{UP}}/meta is for resource "https://evil.example.com/mcp", which is not the upstream {{UP}}/mcp`, fetches: "UP GET /meta",
		},
		{
			name: "metadata naming another issuer is not used", oauth: config.UpstreamOAuth{Discover: true},
			challenge: withMeta, prm: map[string]string{"/meta": prmDoc},
			as:   map[string]string{wellAS: `{"issuer":"https://attacker.example.com","token_endpoint":"{{AS}}/token"}`},
			want: `error: Post "{{UP}}/mcp": upstream "up": OAuth discovery failed: the authorization server metadata at {{AS}}` + wellAS + ` names issuer "https://attacker.example.com", not "{{AS}}"`, fetches: "UP GET /meta, AS GET " + wellAS,
		},
		{
			name: "upstream naming another server than the pinned issuer", oauth: config.UpstreamOAuth{Issuer: "https://idp.example.com"},
			challenge: withMeta, prm: map[string]string{"/meta": prmDoc},
			want: `error: Post "{{UP}}/mcp": upstream "up": OAuth discovery failed: the protected resource metadata at {{UP}}/meta names authorization servers ["{{AS}}"], not the configured oauth.issuer "https://idp.example.com"`, fetches: "UP GET /meta",
		},
		{
			name: "a server for public clients only", oauth: config.UpstreamOAuth{Discover: true},
			challenge: withMeta, prm: map[string]string{"/meta": prmDoc},
			as:   map[string]string{wellAS: `{"issuer":"{{AS}}","token_endpoint":"{{AS}}/token","token_endpoint_auth_methods_supported":["none"]}`},
			want: `error: Post "{{UP}}/mcp": upstream "up": OAuth discovery failed: the authorization server ({{AS}}` + wellAS + `) accepts only ["none"] at its token endpoint`, fetches: "UP GET /meta, AS GET " + wellAS,
		},
		{
			name: "pinned issuer: a resource_metadata on another origin is not fetched", oauth: config.UpstreamOAuth{Issuer: "{{AS}}"},
			challenge: `Bearer resource_metadata="{{AS}}/internal/secret"`, prm: map[string]string{wellPRM: prmDoc},
			as:   map[string]string{wellAS: asDoc, "/internal/secret": prmDoc},
			want: "200", fetches: "UP GET " + wellPRM + ", AS GET " + wellAS,
			token: "basic=false:: form=client_id=cid&client_secret=sec&grant_type=client_credentials&resource={{UPQ}}%2Fmcp&scope=mcp%3Aread+mcp%3Awrite",
		},
		{
			name: "discover: an authorization server the upstream names on an internal address is refused", oauth: config.UpstreamOAuth{Discover: true},
			challenge: withMeta, prm: map[string]string{"/meta": prmDoc}, as: map[string]string{wellAS: asDoc}, noAllow: true,
			want: `error: Post "{{UP}}/mcp": upstream "up": OAuth discovery failed: GET {{AS}}` + wellAS + `: Get "{{AS}}` + wellAS + `": refusing to connect to 127.0.0.1`, fetches: "UP GET /meta",
		},
		{
			name: "discover without any metadata", oauth: config.UpstreamOAuth{Discover: true},
			want:    `error: Post "{{UP}}/mcp": upstream "up": OAuth discovery failed: the upstream published no protected resource metadata`,
			fetches: "UP GET " + wellPRM + ", UP GET /.well-known/oauth-protected-resource",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOAuthWorld(t)
			w.challenge, w.prm, w.asDocs = tc.challenge, tc.prm, tc.as
			if w.asDocs == nil {
				w.asDocs = map[string]string{}
			}
			if w.prm == nil {
				w.prm = map[string]string{}
			}
			o := tc.oauth
			o.ClientID, o.ClientSecret, o.Issuer = "cid", "sec", w.fill(o.Issuer)
			if o.Discover && !tc.noAllow {
				o.AllowAddresses = []string{"127.0.0.1"} // the test's authorization server
			}
			ctx := t.Context()
			base := &http.Client{}
			hc := sharedClientOf(ctx, "up", &config.Upstream{URL: w.up.URL + "/mcp", OAuth: &o}, base)
			if got, want := w.do(ctx, hc, "m"), w.fill(tc.want); !strings.HasPrefix(got, want) {
				t.Errorf("request:\n got %s\nwant %s...", got, want)
			}
			seen, tokens := w.log()
			var fetches []string
			for _, s := range seen {
				if strings.Contains(s, " GET ") {
					fetches = append(fetches, s)
				}
			}
			if got := strings.Join(fetches, ", "); got != w.fill(tc.fetches) {
				t.Errorf("metadata requests:\n got %s\nwant %s", got, w.fill(tc.fetches))
			}
			wantTokens := []string{}
			if tc.token != "" {
				wantTokens = []string{w.fill(tc.token)}
			}
			if fmt.Sprint(tokens) != fmt.Sprint(wantTokens) {
				t.Errorf("token requests:\n got %q\nwant %q", tokens, wantTokens)
			}
		})
	}
}

// TestOAuthStepUp: a 403 insufficient_scope naming a scope not yet asked
// for gets a token for the union of the scopes and the request is sent once
// more; a server that keeps refusing the same scope is not asked again and
// again (the conformance suite's scope-step-up and scope-retry-limit, for
// client credentials).
func TestOAuthStepUp(t *testing.T) {
	w := newOAuthWorld(t)
	w.challenge = withMeta
	w.prm["/meta"] = prmDoc
	w.asDocs[wellAS] = asDoc
	w.need["call"] = "mcp:write"
	w.need["admin"] = "mcp:admin"
	ctx := t.Context()
	base := &http.Client{}
	hc := sharedClientOf(ctx, "up", &config.Upstream{URL: w.up.URL + "/mcp", OAuth: &config.UpstreamOAuth{Discover: true, ClientID: "cid", ClientSecret: "sec", AllowAddresses: []string{"127.0.0.0/8"}}}, base)
	steps := []struct{ method, want string }{
		{"list", "200"}, // 401 → token for mcp:read
		{"call", "200"}, // 403 mcp:write → token for mcp:read mcp:write
		{"list", "200"}, // the stepped-up token serves everything
	}
	for _, s := range steps {
		if got := w.do(ctx, hc, s.method); got != s.want {
			t.Fatalf("%s: %s, want %s", s.method, got, s.want)
		}
	}
	_, tokens := w.log()
	if len(tokens) != 2 || !strings.HasSuffix(tokens[0], "scope=mcp%3Aread") || !strings.HasSuffix(tokens[1], "scope=mcp%3Aread+mcp%3Awrite") {
		t.Errorf("token requests %q, want mcp:read, then mcp:read mcp:write", tokens)
	}
	// mcp:admin, which the authorization server never grants: one step-up,
	// then the refusal stands, with no further token request however often
	// the call is made.
	for range 3 {
		if got := w.do(ctx, hc, "admin"); got != "403" {
			t.Errorf("admin: %s, want the upstream's 403", got)
		}
	}
	_, tokens = w.log()
	if len(tokens) != 3 || !strings.HasSuffix(tokens[2], "scope=mcp%3Aread+mcp%3Awrite+mcp%3Aadmin") {
		t.Errorf("token requests %q, want one more (for mcp:admin) and no others", tokens)
	}
}
