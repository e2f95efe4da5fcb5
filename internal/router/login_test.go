package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"
	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/test/idptest"
)

var (
	loginOPID     = regexp.MustCompile(`name="id" value="([^"]+)"`)
	loginRequest  = regexp.MustCompile(`name="request" value="([^"]+)"`)
	loginCSRFHint = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// TestLoginClientKnowingOnlyTheURL is a client that knows only a route's
// URL: the 401 names the metadata, the metadata names the gateway as
// authorization server, it registers, the user signs in at the OP and
// approves on the gateway's page, and the gateway's token lists and calls
// tools. The upstream never sees a downstream or provider token.
func TestLoginClientKnowingOnlyTheURL(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	idp := idptest.Start(t, idptest.Config{
		Users:   []idptest.User{{ID: "alice", Username: "alice", Password: "pw-alice"}},
		Clients: []idptest.Client{{ID: "mcpgw", Type: "web", Secret: "op-secret-for-the-gateway", RedirectURIs: []string{base + config.LoginCallbackPath}}},
	})
	rec := &headerRecorder{}
	up := httptest.NewServer(rec.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return gatewaytest.SDKServer("alpha", 0) }, nil)))
	t.Cleanup(up.Close)
	// A listener on every interface (the test's is on loopback): Origin
	// is checked strictly, so the consent page's own origin must be let
	// through by name.
	cfg, err := config.Parse("login.yaml", []byte(fmt.Sprintf(`
listen: 0.0.0.0:0
public_url: %s
upstreams: {alpha: {url: %s}}
routes: [{path: /mcp}, {path: /mcp/other}]
policy: {default: allow}
login:
  provider: {issuer: %q, client_id: mcpgw, client_secret: op-secret-for-the-gateway}
`, base, up.URL+"/mcp", idp.Issuer)), nil)
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln, StateDir: t.TempDir()})

	// 1. The 401 and the protected resource metadata.
	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
		t.Fatalf("unauthenticated: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	loginGetJSON(t, base+"/.well-known/oauth-protected-resource/mcp", &prm)
	if len(prm.AuthorizationServers) == 0 || prm.AuthorizationServers[0] != base {
		t.Fatalf("protected resource metadata %+v; want the gateway (%s) as authorization server", prm, base)
	}
	var meta struct {
		Authorization string `json:"authorization_endpoint"`
		Token         string `json:"token_endpoint"`
		Registration  string `json:"registration_endpoint"`
	}
	loginGetJSON(t, base+"/.well-known/oauth-authorization-server", &meta)
	var oidcMeta map[string]any
	loginGetJSON(t, base+"/.well-known/openid-configuration", &oidcMeta)
	if oidcMeta["token_endpoint"] != meta.Token || meta.Registration == "" {
		t.Fatalf("metadata %+v, OpenID discovery %v", meta, oidcMeta)
	}

	// 2. Registration.
	reg, err := http.Post(meta.Registration, "application/json", strings.NewReader(`{"client_name":"SDK client","redirect_uris":["http://127.0.0.1:49152/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	_ = json.NewDecoder(reg.Body).Decode(&client)
	reg.Body.Close()
	if reg.StatusCode != http.StatusCreated || client.ClientID == "" {
		t.Fatalf("registration: %d", reg.StatusCode)
	}

	// 3. The browser: OP login form, then the gateway's consent page.
	verifier, state := oauth2.GenerateVerifier(), "xyz"
	var landed *url.URL
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 15 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), "http://127.0.0.1:49152/") {
			landed = r.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	q := url.Values{"response_type": {"code"}, "client_id": {client.ClientID}, "redirect_uri": {"http://127.0.0.1:49152/cb"}, "state": {state},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}, "resource": {prm.Resource}}
	page := readPage(t)(browser.Get(meta.Authorization + "?" + q.Encode()))
	m := loginOPID.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no OP login form: %.300s", page)
	}
	page = readPage(t)(browser.PostForm(idp.Issuer+"login/username", url.Values{"id": {m[1]}, "username": {"alice"}, "password": {"pw-alice"}}))
	rq, cs := loginRequest.FindStringSubmatch(page), loginCSRFHint.FindStringSubmatch(page)
	if rq == nil || cs == nil || !strings.Contains(page, "SDK client") {
		t.Fatalf("no consent page: %.400s", page)
	}
	form := url.Values{"request": {rq[1]}, "csrf": {cs[1]}, "decision": {"allow"}}
	req, _ := http.NewRequest(http.MethodPost, base+"/oauth/consent", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base) // the gateway's own page: allowed although not in allowed_origins
	readPage(t)(browser.Do(req))
	if landed == nil || landed.Query().Get("code") == "" || landed.Query().Get("iss") != base {
		t.Fatalf("did not come back with a code and iss: %v", landed)
	}

	// 4. The token, then MCP.
	tr, err := http.PostForm(meta.Token, url.Values{"grant_type": {"authorization_code"}, "code": {landed.Query().Get("code")}, "client_id": {client.ClientID},
		"redirect_uri": {"http://127.0.0.1:49152/cb"}, "code_verifier": {verifier}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Access string `json:"access_token"`
	}
	_ = json.NewDecoder(tr.Body).Decode(&tok)
	tr.Body.Close()
	if tr.StatusCode != http.StatusOK || tok.Access == "" {
		t.Fatalf("token: %d", tr.StatusCode)
	}
	session, err := gatewaytest.ConnectWith(t, base+"/mcp", tok.Access, "")
	if err != nil {
		t.Fatalf("MCP with the gateway's token: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, err := session.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %v %+v", err, res)
	}
	// Audience-bound: refused on the other route.
	if _, err := gatewaytest.ConnectWith(t, base+"/mcp/other", tok.Access, ""); err == nil {
		t.Fatal("the token of /mcp was accepted on /mcp/other")
	}
	for _, h := range rec.headers() {
		if h.Get("Authorization") != "" || strings.Contains(fmt.Sprint(h), tok.Access) {
			t.Fatalf("the upstream received a credential: %v", h)
		}
	}
}

func loginGetJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

func readPage(t *testing.T) func(*http.Response, error) string {
	return func(resp *http.Response, err error) string {
		t.Helper()
		return readBody(t, resp, err)
	}
}

func readBody(t *testing.T, resp *http.Response, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// login: is made at start (its keys, state and provider): a reload that
// changes it, or the public URL that is its issuer, is refused by name,
// and one that changes something else keeps it serving.
func TestLoginReloadNeedsRestart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	yaml := func(ttl, publicURL, policy string) *config.Config {
		cfg, err := config.Parse("login.yaml", []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
public_url: %s
upstreams: {alpha: {url: %s}}
policy: {default: %s}
login:
  access_token_ttl: %s
  provider: {issuer: "https://idp.example.com", client_id: mcpgw, client_secret: op-secret}
`, publicURL, gatewaytest.HTTPUpstream(t, "alpha", 0), policy, ttl)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	gw := gatewaytest.RunGateway(t, yaml("5m", base, "allow"), gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	for _, c := range []struct {
		cfg  *config.Config
		want string
	}{
		{yaml("10m", base, "allow"), "login"},
		{yaml("5m", "http://localhost:1", "allow"), "public_url (the issuer of login:)"},
	} {
		if err := gw.Reload(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("reload: %v; want a refusal naming %s", err, c.want)
		}
	}
	if err := gw.Reload(yaml("5m", base, "deny")); err != nil {
		t.Fatalf("a reload leaving login: alone: %v", err)
	}
	var meta struct {
		Issuer string `json:"issuer"`
	}
	loginGetJSON(t, base+"/.well-known/oauth-authorization-server", &meta)
	if meta.Issuer != base {
		t.Fatalf("after a reload the metadata names %q", meta.Issuer)
	}
}
