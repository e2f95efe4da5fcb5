package oauthclient

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// fakeAS is an authorization server and a protected resource on two
// loopback servers. meta adjusts the AS metadata; prm the resource's.
type fakeAS struct {
	t        *testing.T
	as, rs   *httptest.Server
	meta     map[string]any // overrides of the AS metadata
	prm      map[string]any // overrides of the protected resource metadata
	regReply map[string]any // overrides of the registration answer

	prmPath     string // where the resource metadata is (default the well-known URL)
	rsChallenge string // the resource's 401 challenge ({RS}: its URL); "" answers 404

	mu        sync.Mutex
	regs      []map[string]any // registration requests
	tokenReqs []tokenReq
	challenge string // S256 challenge of the last authorization request
	tokenErr  string // answer token requests with this OAuth error
}

type tokenReq struct {
	form       url.Values
	basicUser  string
	basicPass  string
	pkceOK     bool
	authHeader bool
}

func newFakeAS(t *testing.T) *fakeAS {
	f := &fakeAS{t: t, meta: map[string]any{}, prm: map[string]any{}, regReply: map[string]any{}}
	f.as = httptest.NewServer(http.HandlerFunc(f.serveAS))
	f.rs = httptest.NewServer(http.HandlerFunc(f.serveRS))
	t.Cleanup(func() { f.as.Close(); f.rs.Close() })
	return f
}

func (f *fakeAS) upstream() string { return f.rs.URL + "/mcp" }

func (f *fakeAS) serveRS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	prmPath, challenge := f.prmPath, f.rsChallenge
	f.mu.Unlock()
	if prmPath == "" {
		prmPath = "/.well-known/oauth-protected-resource/mcp"
	}
	if r.URL.Path == "/mcp" && challenge != "" {
		w.Header().Set("WWW-Authenticate", strings.ReplaceAll(challenge, "{RS}", f.rs.URL))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.URL.Path != prmPath {
		http.NotFound(w, r)
		return
	}
	m := map[string]any{"resource": f.upstream(), "authorization_servers": []string{f.as.URL}}
	for k, v := range f.prm {
		m[k] = v
	}
	writeJSON(w, http.StatusOK, m)
}

func (f *fakeAS) serveAS(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		m := map[string]any{
			"issuer": f.as.URL, "authorization_endpoint": f.as.URL + "/authorize", "token_endpoint": f.as.URL + "/token",
			"registration_endpoint": f.as.URL + "/register", "code_challenge_methods_supported": []string{"S256"},
		}
		for k, v := range f.meta {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		writeJSON(w, http.StatusOK, m)
	case "/register":
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.regs = append(f.regs, req)
		ans := map[string]any{"client_id": fmt.Sprintf("dyn-%d", len(f.regs)), "client_secret": "dyn-secret"}
		for k, v := range f.regReply {
			if v == nil {
				delete(ans, k)
			} else {
				ans[k] = v
			}
		}
		writeJSON(w, http.StatusCreated, ans)
	case "/token":
		_ = r.ParseForm()
		tr := tokenReq{form: r.PostForm}
		tr.basicUser, tr.basicPass, tr.authHeader = r.BasicAuth()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		tr.pkceOK = base64.RawURLEncoding.EncodeToString(sum[:]) == f.challenge
		f.tokenReqs = append(f.tokenReqs, tr)
		if f.tokenErr != "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": f.tokenErr, "error_description": "told to refuse"})
			return
		}
		ans := map[string]any{"access_token": fmt.Sprintf("at-%d", len(f.tokenReqs)), "token_type": "Bearer", "expires_in": 60}
		if r.PostForm.Get("grant_type") == "authorization_code" {
			ans["refresh_token"] = "rt-1"
		}
		writeJSON(w, http.StatusOK, ans)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

const testRedirect = "https://gw.example/oauth/upstream/up/callback"

func (f *fakeAS) client(cfg Config) *Client {
	cfg.Name = "up"
	cfg.Now = func() time.Time { return time.Unix(1000, 0) }
	return New(cfg, f.as.Client(), zap.NewNop())
}

// authorize is the user agent's trip: it returns the authorization
// response the AS would redirect with (code, state, iss).
func (f *fakeAS) authorize(t *testing.T, flow *Flow, iss string, omitIss bool) url.Values {
	t.Helper()
	u, err := url.Parse(flow.AuthURL)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.challenge = u.Query().Get("code_challenge")
	f.mu.Unlock()
	q := url.Values{"code": {"c0de"}, "state": {u.Query().Get("state")}}
	if !omitIss {
		q.Set("iss", iss)
	}
	return q
}

// TestBegin covers discovery, registration and scope selection: what the
// authorization request asks for, or why there is none.
func TestBegin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		challenge string
		previous  []string
		scopes    []string
		meta      map[string]any
		prm       map[string]any
		wantErr   string
		wantScope string // "-" for no scope parameter
		wantID    string // client_id
		wantRegs  int
	}{
		{name: "scope from challenge", challenge: `Bearer scope="a b"`, prm: map[string]any{"scopes_supported": []string{"x"}}, wantScope: "a b", wantID: "dyn-1", wantRegs: 1},
		{name: "scope from scopes_supported", prm: map[string]any{"scopes_supported": []string{"x", "y"}}, wantScope: "x y", wantID: "dyn-1", wantRegs: 1},
		{name: "no scope", wantScope: "-", wantID: "dyn-1", wantRegs: 1},
		{name: "offline_access where listed", cfg: Config{Offline: true}, challenge: `Bearer scope="a"`, meta: map[string]any{"scopes_supported": []string{"a", "offline_access"}}, wantScope: "a offline_access", wantID: "dyn-1", wantRegs: 1},
		{name: "no offline_access where not listed", cfg: Config{Offline: true}, challenge: `Bearer scope="a"`, meta: map[string]any{"scopes_supported": []string{"a"}}, wantScope: "a", wantID: "dyn-1", wantRegs: 1},
		{name: "offline_access from a challenge dropped where not listed", challenge: `Bearer scope="a offline_access"`, wantScope: "a", wantID: "dyn-1", wantRegs: 1},
		{name: "configured scopes win", cfg: Config{}, scopes: []string{"cfg"}, challenge: `Bearer scope="a"`, wantScope: "cfg", wantID: "dyn-1", wantRegs: 1},
		{name: "step-up asks for the union", challenge: `Bearer error="insufficient_scope", scope="w"`, previous: []string{"r"}, wantScope: "r w", wantID: "dyn-1", wantRegs: 1},
		{name: "step-up for what was asked stops", challenge: `Bearer error="insufficient_scope", scope="r"`, previous: []string{"r"}, wantErr: `still refuses with insufficient_scope for ["r"]`},
		{name: "pre-registered client, no registration", cfg: Config{Preregistered: map[string]Credentials{"": {ClientID: "pre", ClientSecret: "s"}}}, wantScope: "-", wantID: "pre"},
		{name: "client ID metadata document", cfg: Config{MetadataDocumentURL: "https://gw.example/client.json"}, meta: map[string]any{"client_id_metadata_document_supported": true}, wantScope: "-", wantID: "https://gw.example/client.json"},
		{name: "metadata document not supported: registration", cfg: Config{MetadataDocumentURL: "https://gw.example/client.json"}, wantScope: "-", wantID: "dyn-1", wantRegs: 1},
		{name: "metadata document only, server without it", cfg: Config{MetadataDocumentURL: "https://gw.example/client.json", NoDynamicRegistration: true}, wantErr: "it does not accept client ID metadata documents"},
		{name: "no S256", meta: map[string]any{"code_challenge_methods_supported": []string{"plain"}}, wantErr: `does not list S256 in code_challenge_methods_supported (it lists ["plain"])`},
		{name: "no PKCE methods listed", meta: map[string]any{"code_challenge_methods_supported": nil}, wantErr: `does not list S256`},
		{name: "issuer mismatch", meta: map[string]any{"issuer": "https://attacker.example"}, wantErr: `names issuer "https://attacker.example", not`},
		{name: "resource mismatch", prm: map[string]any{"resource": "https://evil.example/mcp"}, wantErr: `is for resource "https://evil.example/mcp", which is not the upstream`},
		{name: "no registration endpoint", meta: map[string]any{"registration_endpoint": nil}, wantErr: "offers no dynamic client registration"},
		{name: "no usable auth method", meta: map[string]any{"token_endpoint_auth_methods_supported": []string{"private_key_jwt"}}, wantErr: `accepts only ["private_key_jwt"]`},
		{name: "plain-http authorization endpoint", meta: map[string]any{"authorization_endpoint": "http://as.example/authorize"}, wantErr: "is plain http on a host that is not loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAS(t)
			f.meta, f.prm = tc.meta, tc.prm
			if f.meta == nil {
				f.meta = map[string]any{}
			}
			if f.prm == nil {
				f.prm = map[string]any{}
			}
			c := f.client(tc.cfg)
			var ch []string
			if tc.challenge != "" {
				ch = []string{tc.challenge + `, resource_metadata="` + f.rs.URL + `/.well-known/oauth-protected-resource/mcp"`}
			}
			flow, err := c.Begin(context.Background(), Request{UpstreamURL: f.upstream(), Challenge: ch, RedirectURI: testRedirect, Previous: tc.previous, Scopes: tc.scopes})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), `upstream "up"`) {
					t.Fatalf("err = %v, want one naming the upstream and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(flow.AuthURL)
			q := u.Query()
			scope, hasScope := q["scope"]
			switch {
			case tc.wantScope == "-" && hasScope:
				t.Errorf("scope = %q, want none", scope)
			case tc.wantScope != "-" && q.Get("scope") != tc.wantScope:
				t.Errorf("scope = %q, want %q", q.Get("scope"), tc.wantScope)
			}
			for k, want := range map[string]string{
				"client_id": tc.wantID, "resource": f.upstream(), "code_challenge_method": "S256",
				"response_type": "code", "redirect_uri": testRedirect, "state": flow.State,
			} {
				if q.Get(k) != want {
					t.Errorf("%s = %q, want %q", k, q.Get(k), want)
				}
			}
			if u.Scheme+"://"+u.Host+u.Path != f.as.URL+"/authorize" {
				t.Errorf("authorization request goes to %s", flow.AuthURL)
			}
			if len(f.regs) != tc.wantRegs {
				t.Errorf("%d registrations, want %d", len(f.regs), tc.wantRegs)
			}
			if strings.Contains(flow.AuthURL, "secret") {
				t.Errorf("the authorization URL carries a secret: %s", flow.AuthURL)
			}
		})
	}
}

// TestRegistrationPerServer: one registration per server and redirect URI,
// reused by later flows, and a new one when the resource moves to another
// server (SEP-2352) — never the old server's client there.
func TestRegistrationPerServer(t *testing.T) {
	f := newFakeAS(t)
	other := newFakeAS(t)
	c := f.client(Config{Offline: true, ApplicationType: "native", ClientName: "gw"})
	begin := func() *Flow {
		t.Helper()
		flow, err := c.Begin(context.Background(), Request{UpstreamURL: f.upstream(), RedirectURI: testRedirect})
		if err != nil {
			t.Fatal(err)
		}
		return flow
	}
	a, b := begin(), begin()
	if len(f.regs) != 1 || a.Grant.ClientID != b.Grant.ClientID {
		t.Fatalf("%d registrations, client ids %q %q: want one shared", len(f.regs), a.Grant.ClientID, b.Grant.ClientID)
	}
	reg := f.regs[0]
	if fmt.Sprint(reg["grant_types"]) != "[authorization_code refresh_token]" || reg["application_type"] != "native" ||
		reg["token_endpoint_auth_method"] != AuthMethodBasic || fmt.Sprint(reg["redirect_uris"]) != "["+testRedirect+"]" || reg["client_name"] != "gw" {
		t.Errorf("registration request %v", reg)
	}
	// A registration whose secret has expired is made anew.
	f.regReply["client_secret_expires_at"] = 1500 // the test clock is at 1000
	c.cfg.Now = func() time.Time { return time.Unix(1000, 0) }
	c.regs.Delete(f.as.URL, testRedirect)
	begin()
	c.cfg.Now = func() time.Time { return time.Unix(2000, 0) }
	if again := begin(); len(f.regs) != 3 || again.Grant.ClientID != "dyn-3" {
		t.Errorf("after the secret expired: %d registrations, client %q; want a new one", len(f.regs), again.Grant.ClientID)
	}
	f.prm["authorization_servers"] = []string{other.as.URL}
	other.regReply["client_id"] = "at-other"
	c.cfg.Now = func() time.Time { return time.Unix(2000, 0).Add(discoveryTTL) } // the discovery is reused until then
	moved := begin()
	if len(other.regs) != 1 || moved.Grant.ClientID != "at-other" || moved.Grant.Issuer != other.as.URL {
		t.Errorf("after the move: %d registrations at the new server, grant %+v", len(other.regs), moved.Grant)
	}
}

// TestComplete covers the authorization response's checks (state, RFC 9207
// iss) and the code exchange with each token endpoint authentication.
func TestComplete(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        Config
		meta       map[string]any
		regReply   map[string]any
		iss        string // "{AS}" for the right one
		omitIss    bool
		badState   bool
		errorParam string
		wantErr    string
		wantAuth   string // basic, post, none
	}{
		{name: "iss advertised and right", meta: map[string]any{"authorization_response_iss_parameter_supported": true}, iss: "{AS}", wantAuth: "basic"},
		{name: "iss advertised and missing", meta: map[string]any{"authorization_response_iss_parameter_supported": true}, omitIss: true, wantErr: "has no iss, though"},
		{name: "iss advertised and wrong", meta: map[string]any{"authorization_response_iss_parameter_supported": true}, iss: "https://evil.example", wantErr: `iss "https://evil.example" is not the authorization server`},
		{name: "iss with a trailing slash", meta: map[string]any{"authorization_response_iss_parameter_supported": true}, iss: "{AS}/", wantErr: "is not the authorization server"},
		{name: "iss not advertised and absent", omitIss: true, wantAuth: "basic"},
		{name: "iss not advertised but wrong", iss: "https://evil.example", wantErr: "is not the authorization server"},
		{name: "state mismatch", iss: "{AS}", badState: true, wantErr: "state does not match"},
		{name: "authorization refused", iss: "{AS}", errorParam: "access_denied", wantErr: `answered "access_denied"`},
		{name: "client_secret_post", meta: map[string]any{"token_endpoint_auth_methods_supported": []string{AuthMethodPost}}, regReply: map[string]any{"token_endpoint_auth_method": nil}, iss: "{AS}", wantAuth: "post"},
		{name: "assigned method wins", regReply: map[string]any{"token_endpoint_auth_method": AuthMethodPost}, iss: "{AS}", wantAuth: "post"},
		{name: "public client", meta: map[string]any{"token_endpoint_auth_methods_supported": []string{AuthMethodNone}}, regReply: map[string]any{"client_secret": nil, "token_endpoint_auth_method": AuthMethodNone}, iss: "{AS}", wantAuth: "none"},
		{name: "pre-registered, basic", cfg: Config{Preregistered: map[string]Credentials{"": {ClientID: "pre id", ClientSecret: "p:s"}}}, iss: "{AS}", wantAuth: "basic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAS(t)
			for k, v := range tc.meta {
				f.meta[k] = v
			}
			for k, v := range tc.regReply {
				f.regReply[k] = v
			}
			c := f.client(tc.cfg)
			flow, err := c.Begin(context.Background(), Request{UpstreamURL: f.upstream(), RedirectURI: testRedirect})
			if err != nil {
				t.Fatal(err)
			}
			q := f.authorize(t, flow, strings.ReplaceAll(tc.iss, "{AS}", f.as.URL), tc.omitIss)
			if tc.badState {
				q.Set("state", "forged")
			}
			if tc.errorParam != "" {
				q.Del("code")
				q.Set("error", tc.errorParam)
			}
			tok, err := c.Complete(context.Background(), flow, q)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if len(f.tokenReqs) != 0 {
					t.Errorf("the code went to the token endpoint anyway")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(f.tokenReqs) != 1 {
				t.Fatalf("%d token requests", len(f.tokenReqs))
			}
			tr := f.tokenReqs[0]
			if !tr.pkceOK || tr.form.Get("resource") != f.upstream() || tr.form.Get("code") != "c0de" || tr.form.Get("redirect_uri") != testRedirect || tr.form.Get("grant_type") != "authorization_code" {
				t.Errorf("token request %v (pkce ok %v)", tr.form, tr.pkceOK)
			}
			got := "none"
			switch {
			case tr.authHeader:
				got = "basic"
				if tr.form.Has("client_secret") {
					t.Errorf("secret sent twice")
				}
			case tr.form.Has("client_secret"):
				got = "post"
			}
			if got != tc.wantAuth {
				t.Errorf("token endpoint authentication %s, want %s", got, tc.wantAuth)
			}
			if tc.cfg.Preregistered != nil && (tr.basicUser != "pre+id" || tr.basicPass != "p%3As") {
				t.Errorf("basic credentials %q:%q, want each form-encoded", tr.basicUser, tr.basicPass)
			}
			if tok.AccessToken != "at-1" || tok.RefreshToken != "rt-1" || !tok.Expiry.Equal(time.Unix(1060, 0)) {
				t.Errorf("token %+v", tok)
			}
		})
	}
}

// TestRefresh: a refresh keeps the grant (resource, client), keeps the old
// refresh token when the server issues none, and an invalid_grant says
// authorize again.
func TestRefresh(t *testing.T) {
	f := newFakeAS(t)
	c := f.client(Config{})
	flow, err := c.Begin(context.Background(), Request{UpstreamURL: f.upstream(), RedirectURI: testRedirect, Challenge: []string{`Bearer scope="s"`}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.Complete(context.Background(), flow, f.authorize(t, flow, f.as.URL, false))
	if err != nil {
		t.Fatal(err)
	}
	next, err := c.Refresh(context.Background(), tok.Grant, tok.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	tr := f.tokenReqs[1]
	if tr.form.Get("grant_type") != "refresh_token" || tr.form.Get("refresh_token") != "rt-1" || tr.form.Get("resource") != f.upstream() || tr.form.Get("scope") != "s" || !tr.authHeader {
		t.Errorf("refresh request %v", tr.form)
	}
	if next.AccessToken != "at-2" || next.RefreshToken != "rt-1" {
		t.Errorf("refreshed token %+v", next)
	}
	f.tokenErr = "invalid_grant"
	_, err = c.Refresh(context.Background(), tok.Grant, "rt-1")
	if !IsInvalidGrant(err) || !strings.Contains(err.Error(), `"told to refuse"`) {
		t.Errorf("err = %v, want invalid_grant with the server's description", err)
	}
	// A grant whose client the gateway no longer knows (its registration
	// gone) is refused before anything is sent.
	gone := tok.Grant
	gone.ClientID = "forgotten"
	n := len(f.tokenReqs)
	if _, err := c.Refresh(context.Background(), gone, "rt-1"); !IsInvalidGrant(err) || !strings.Contains(err.Error(), "is no longer known") || len(f.tokenReqs) != n {
		t.Errorf("err = %v after %d requests, want a refusal without one", err, len(f.tokenReqs)-n)
	}
}

// TestFlowCarriesNoSecret: what the caller stores with the user's state
// never holds the client secret.
func TestFlowCarriesNoSecret(t *testing.T) {
	f := newFakeAS(t)
	flow, err := f.client(Config{}).Begin(context.Background(), Request{UpstreamURL: f.upstream(), RedirectURI: testRedirect})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(flow)
	if strings.Contains(string(b), "dyn-secret") || flow.Verifier == "" || len(flow.State) < 32 {
		t.Errorf("flow %s", b)
	}
}

// TestBeginProbes: without a challenge, Begin gets the upstream's own (an
// unauthenticated request), so a resource_metadata only the challenge names
// and the challenge's scope are used; NoProbe discovers from the
// well-known URLs alone.
func TestBeginProbes(t *testing.T) {
	f := newFakeAS(t)
	f.prmPath = "/custom/meta.json"
	f.rsChallenge = `Bearer scope="probed", resource_metadata="{RS}/custom/meta.json"`
	c := f.client(Config{})
	flow, err := c.Begin(context.Background(), Request{UpstreamURL: f.upstream(), RedirectURI: testRedirect})
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(flow.AuthURL); u.Query().Get("scope") != "probed" {
		t.Errorf("scope = %q, want the probed challenge's", u.Query().Get("scope"))
	}
	_, err = c.Begin(context.Background(), Request{UpstreamURL: f.upstream(), RedirectURI: testRedirect, NoProbe: true})
	if err == nil || !strings.Contains(err.Error(), "published no protected resource metadata (asked "+f.rs.URL+"/.well-known/oauth-protected-resource/mcp, ") {
		t.Errorf("err = %v, want no metadata at the well-known URLs", err)
	}
}
