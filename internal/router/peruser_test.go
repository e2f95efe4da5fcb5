package router_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	mcpc "github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/test/idptest"
)

// Per-user upstream OAuth end to end: an official-SDK upstream protected
// by the real test OP (it verifies every token against the OP's JWKS and
// publishes RFC 9728 metadata naming the OP), the gateway as the OAuth
// client of that OP, users who sign in to the gateway at the same OP (a
// client of their own), and a browser (an HTTP client with a cookie jar)
// that follows the start link through the OP's login form to the
// gateway's callback.

const (
	puSecret = "gw-peruser-secret-5f0e"
	puName   = "gh"
)

type perUserEnv struct {
	t        *testing.T
	idp      *idptest.IdP
	addr     string // the gateway's listen address, fixed across restarts
	base     string
	cfg      string
	up       *protectedUpstream
	gw       *gateway.Gateway
	tokens   map[string]string // downstream tokens by user
	keyFile  string
	storeDir string
	clock    *gatewaytest.Clock // the gateway's: its upstream tokens expire by it
}

// protectedUpstream is an SDK server whose whoami tool names the
// verified token's user; it answers 401 without a valid token and
// publishes its protected-resource metadata.
type protectedUpstream struct {
	url  string
	mu   sync.Mutex
	subs []string // sub of every request whose token verified
}

func newProtectedUpstream(t *testing.T, idp *idptest.IdP) *protectedUpstream {
	u := &protectedUpstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	verify := func(ctx context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		c, err := idp.Verify(ctx, token, gatewaytest.IdPGWClient) // code-flow tokens: aud is the gateway's client id
		if err != nil {
			return nil, fmt.Errorf("%w: %v", sdkauth.ErrInvalidToken, err)
		}
		u.mu.Lock()
		u.subs = append(u.subs, c.Subject)
		u.mu.Unlock()
		return &sdkauth.TokenInfo{UserID: c.Subject, Expiration: time.Now().Add(time.Minute)}, nil
	}
	var ts *httptest.Server
	protected := sdkauth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, ts.URL+"/mcp", idp.Issuer)
			return
		}
		protected.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

func (u *protectedUpstream) sawSubs() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.subs...)
}

func newPerUserEnv(t *testing.T) *perUserEnv { return newPerUserEnvWith(t, nil) }

// newPerUserEnvWith lets edit change the config before the gateway starts.
func newPerUserEnvWith(t *testing.T, edit func(string) string) *perUserEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &perUserEnv{t: t, addr: ln.Addr().String(), base: "http://" + ln.Addr().String(), tokens: map[string]string{}, clock: gatewaytest.NewClock(time.Now())}
	dir := t.TempDir()
	e.keyFile, e.storeDir = filepath.Join(dir, "keys"), filepath.Join(dir, "state")
	if err := os.WriteFile(e.keyFile, []byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.idp = idptest.Start(t, idptest.Config{
		Users: []idptest.User{{ID: "alice", Username: "alice", Password: "pw-alice"}, {ID: "bob", Username: "bob", Password: "pw-bob"}},
		Clients: []idptest.Client{
			{ID: gatewaytest.IdPAppClient, Type: "native", RedirectURIs: []string{gatewaytest.IdPAppRedirect}},
			{ID: gatewaytest.IdPGWClient, Type: "web", Secret: puSecret, RedirectURIs: []string{e.base + config.RedirectPath(puName)}},
		},
		AccessTokenLifetime: "3s", // expiry, then refresh, within the test
	})
	for _, user := range []string{"alice", "bob"} {
		tok, err := e.idp.Login(context.Background(), gatewaytest.IdPAppClient, gatewaytest.IdPAppRedirect, user, "pw-"+user, "openid")
		if err != nil {
			t.Fatalf("%s signs in to the gateway's issuer: %v", user, err)
		}
		e.tokens[user] = tok.AccessToken
	}
	e.up = newProtectedUpstream(t, e.idp)
	e.cfg = fmt.Sprintf(`
public_url: %[1]s
auth:
  oidc: {issuer: %[2]q, audience: %[3]s}
sessions: {key_file: %[4]s}
policy: {default: allow}
upstreams:
  %[5]s:
    url: %[6]s
    auth:
      per_user:
        client_id: %[7]s
        client_secret: %[8]s
        issuer: %[2]q
        scopes: [openid]
        store: {file: %[9]s}
`, e.base, e.idp.Issuer, gatewaytest.IdPAppClient, e.keyFile, puName, e.up.url, gatewaytest.IdPGWClient, puSecret, filepath.Join(e.storeDir, "tokens.json"))
	if edit != nil {
		e.cfg = edit(e.cfg)
	}
	e.start(ln)
	return e
}

// start runs a gateway on ln (nil: a new listener on the same address).
func (e *perUserEnv) start(ln net.Listener) {
	e.t.Helper()
	if ln == nil {
		var err error
		for i := 0; ; i++ {
			if ln, err = net.Listen("tcp", e.addr); err == nil || i == 50 {
				break
			}
			time.Sleep(20 * time.Millisecond) // a poll for the port, bounded by 50 tries
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
	cfg, err := config.Parse("peruser.yaml", []byte(e.cfg), nil)
	if err != nil {
		e.t.Fatalf("config: %v", err)
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: zaptest.NewLogger(e.t), Listener: ln, Now: e.clock.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	e.gw = gw
	e.t.Cleanup(func() { e.stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gw.Host().WaitReady(ctx); err != nil {
		e.t.Fatalf("upstreams did not start: %v", err)
	}
}

func (e *perUserEnv) stop() {
	if e.gw == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = e.gw.Shutdown(ctx)
	e.gw = nil
}

// client is a raw MCP client for user that declares caps.
func (e *perUserEnv) client(user, caps string) *gatewaytest.RawClient {
	c := &gatewaytest.RawClient{T: e.t, URL: e.base + "/mcp", Header: http.Header{"Authorization": {"Bearer " + e.tokens[user]}}}
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"raw","version":"1"}}}`)
	if r.Status != http.StatusOK {
		e.t.Fatalf("initialize: HTTP %d %s", r.Status, r.Body)
	}
	c.Session = r.Header.Get("Mcp-Session-Id")
	c.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

const callWhoami = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gh__whoami","arguments":{}}}`

// elicitation is what a -32042 names.
type elicitation struct {
	Mode, ElicitationID, URL, Message string
}

func elicitationOf(t *testing.T, r *gatewaytest.RawResponse) elicitation {
	t.Helper()
	e := gatewaytest.ErrorOf(t, r)
	var d struct{ Elicitations []elicitation }
	if e.Code != mcpc.CodeURLElicitationRequired || json.Unmarshal(e.Data, &d) != nil || len(d.Elicitations) != 1 {
		t.Fatalf("want -32042 with one elicitation, got %d %s %s", e.Code, e.Message, e.Data)
	}
	return d.Elicitations[0]
}

var puHiddenID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// consent is a user's browser: it follows link through the OP's login
// form back to the gateway's callback and returns the final page.
func (e *perUserEnv) consent(link, user string) (int, string) {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 15 * time.Second}
	page := func(resp *http.Response, err error) (int, string) {
		if err != nil {
			e.t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := page(c.Get(link))
	m := puHiddenID.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		e.t.Fatalf("start link: %d %.300s; want the OP's login form", status, body)
	}
	return page(c.PostForm(e.idp.Issuer+"login/username", url.Values{"id": {m[1]}, "username": {user}, "password": {"pw-" + user}}))
}

func TestPerUserOAuthEndToEnd(t *testing.T) {
	t.Parallel()
	e := newPerUserEnv(t)
	urlCaps := `{"elicitation":{"url":{}}}`

	// alice's client declares URL elicitation: -32042 naming the start page,
	// for tools/list (nothing to list until she authorizes) as for a call.
	alice := e.client("alice", urlCaps)
	elicitationOf(t, alice.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`))
	// A client without URL elicitation gets an error carrying the link.
	if le := gatewaytest.ErrorOf(t, e.client("bob", `{}`).Post(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`)); le.Code == mcpc.CodeURLElicitationRequired || !strings.Contains(le.Message, e.base+config.StartPath(puName)+"?t=") {
		t.Fatalf("tools/list of a client without URL elicitation: %d %s", le.Code, le.Message)
	}
	el := elicitationOf(t, alice.Post(callWhoami))
	if el.Mode != "url" || el.ElicitationID == "" || !strings.HasPrefix(el.URL, e.base+config.StartPath(puName)+"?t=") {
		t.Fatalf("elicitation %+v", el)
	}
	// Her session's GET stream hears when she is done.
	done := listenFor(t, alice, mcpc.NotificationElicitationDone)
	if status, page := e.consent(el.URL, "alice"); status != http.StatusOK || !strings.Contains(page, "You can close this window") {
		t.Fatalf("alice's consent: %d %s", status, page)
	}
	select {
	case params := <-done:
		if !strings.Contains(params, el.ElicitationID) {
			t.Fatalf("elicitation/complete for %s, want %s", params, el.ElicitationID)
		}
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("no notifications/elicitation/complete on alice's session")
	}
	if got := whoamiRaw(t, alice); got != "alice" {
		t.Fatalf("after consent, whoami = %q, want alice", got)
	}
	if r := alice.Post(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}`); !strings.Contains(string(r.Body), `"gh__whoami"`) {
		t.Fatalf("after consent, tools/list: %s", r.Body)
	}

	// bob gets his own elicitation, not alice's token; an SDK client that
	// declares no URL elicitation gets a tool error carrying the link.
	bob, err := gatewaytest.ConnectWith(t, e.base+"/mcp", e.tokens["bob"], "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	_, err = gatewaytest.Whoami(t, bob, puName+"__whoami")
	if err == nil || !strings.Contains(err.Error(), e.base+config.StartPath(puName)+"?t=") {
		t.Fatalf("bob without authorization: %v; want a tool error with the link", err)
	}
	link := regexp.MustCompile(`http://\S+/start\?t=[A-Za-z0-9_-]+`).FindString(err.Error())
	if status, page := e.consent(link, "bob"); status != http.StatusOK {
		t.Fatalf("bob's consent: %d %s", status, page)
	}
	if got, err := gatewaytest.Whoami(t, bob, puName+"__whoami"); err != nil || got != "bob" {
		t.Fatalf("bob after consent: %q, %v", got, err)
	}
	if got := whoamiRaw(t, alice); got != "alice" {
		t.Fatalf("alice after bob: %q", got)
	}

	// A reload cannot change the per-user section (its store and pages are
	// built at start): refused, naming it.
	changed, err := config.Parse("peruser.yaml", []byte(strings.Replace(e.cfg, "scopes: [openid]", "scopes: [openid, profile]", 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.gw.Reload(changed); err == nil || !strings.Contains(err.Error(), "upstreams.gh.auth.per_user") {
		t.Fatalf("reload changing per_user: %v; want it refused", err)
	}

	// Expiry (the OP's tokens live 3s): the refresh token is used, no new flow.
	codes := e.idp.TokenRequests(t)["authorization_code"]
	refreshes := e.idp.TokenRequests(t)["refresh_token"]
	// On the gateway's clock; on the OP's (the wall's) the old token is
	// still valid, so only the gateway's expiry asks for the refresh. (A
	// 3s token is always within the source's 1m RefreshBefore, so it is
	// refreshed even without the advance: the check is of the refresh
	// path, not of the margin.)
	e.clock.Advance(3500 * time.Millisecond)
	if got := whoamiRaw(t, alice); got != "alice" {
		t.Fatalf("after expiry: %q", got)
	}
	if n := e.idp.TokenRequests(t)["refresh_token"]; n <= refreshes {
		t.Fatal("the expired token was not refreshed")
	}

	// A restart keeps the tokens (encrypted file store): no new flow.
	e.stop()
	e.start(nil)
	alice = e.client("alice", urlCaps)
	if got := whoamiRaw(t, alice); got != "alice" {
		t.Fatalf("after restart: %q", got)
	}
	if n := e.idp.TokenRequests(t)["authorization_code"]; n != codes {
		t.Fatalf("%d new authorizations after the restart, want none", n-codes)
	}

	// alice revokes her own token (DELETE, her gateway credentials): the
	// next call elicits again.
	req, _ := http.NewRequest(http.MethodDelete, e.base+config.TokenPath(puName), nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"revoked":true`) {
		t.Fatalf("DELETE token: %d %s", resp.StatusCode, body)
	}
	elicitationOf(t, alice.Post(callWhoami))
	// Without gateway credentials the DELETE is refused.
	req, _ = http.NewRequest(http.MethodDelete, e.base+config.TokenPath(puName), nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("DELETE without credentials: %v %v", resp.StatusCode, err)
	}

	// The admin revokes bob's from the store (what mcpgw tokens revoke
	// does), while the gateway runs.
	cfg, err := config.Parse("peruser.yaml", []byte(e.cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := gateway.RevokeTokens(context.Background(), cfg, puName, "bob@"+e.idp.Issuer, false); err != nil || n != 1 {
		t.Fatalf("RevokeTokens(bob) = %d, %v", n, err)
	}
	bob, err = gatewaytest.ConnectWith(t, e.base+"/mcp", e.tokens["bob"], "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gatewaytest.Whoami(t, bob, puName+"__whoami"); err == nil || !strings.Contains(err.Error(), "/start?t=") {
		t.Fatalf("bob after the admin's revoke: %v; want the link again", err)
	}
	for _, s := range e.up.sawSubs() {
		if s != "alice" && s != "bob" {
			t.Fatalf("the upstream saw sub %q", s)
		}
	}
}

// whoamiRaw calls whoami on the raw client and returns its text.
func whoamiRaw(t *testing.T, c *gatewaytest.RawClient) string {
	t.Helper()
	m := c.Post(callWhoami).Last(t)
	if m.Error != nil {
		t.Fatalf("whoami: %d %s", m.Error.Code, m.Error.Message)
	}
	var res struct {
		IsError bool
		Content []struct{ Text string }
	}
	if json.Unmarshal(m.Result, &res) != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("whoami result %s", m.Result)
	}
	return res.Content[0].Text
}

// listenFor opens the session's GET stream and yields the params of the
// first notification named method.
func listenFor(t *testing.T, c *gatewaytest.RawClient, method string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	for k, v := range c.Header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, resp)
	}
	out := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		rd := sse.NewReader(bufio.NewReader(resp.Body), 1<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			if m, err := jsonrpc.Parse(ev.Data); err == nil && m.Method == method {
				out <- string(m.Params)
				return
			}
		}
	}()
	return out
}

// Two replicas sharing sessions.redis (and the key ring): the tokens live
// in Redis, so a user who authorized through one replica's pages is served
// by the other, and a link used at one is refused at the other.
func TestPerUserOAuthAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	e := newPerUserEnvWith(t, func(cfg string) string {
		cfg = strings.Replace(cfg, "sessions: {key_file: ", "sessions: {redis: {addr: "+rs.Addr+"}, key_file: ", 1)
		return regexp.MustCompile(`(?m)^\s+store: \{file: .*\}\n`).ReplaceAllString(cfg, "") // the default with sessions.redis: Redis
	})
	cfg, err := config.Parse("peruser.yaml", []byte(e.cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Upstreams[puName].Auth.PerUser.Store.Redis {
		t.Fatal("with sessions.redis the default store is not Redis")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
	b := &gatewaytest.RawClient{T: t, URL: "http://" + ln.Addr().String() + "/mcp", Header: http.Header{"Authorization": {"Bearer " + e.tokens["alice"]}}}
	r := b.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"raw","version":"1"}}}`)
	b.Session = r.Header.Get("Mcp-Session-Id")
	b.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	el := elicitationOf(t, b.Post(callWhoami)) // replica B hands out a link to the public URL (replica A)
	if status, page := e.consent(el.URL, "alice"); status != http.StatusOK {
		t.Fatalf("consent through replica A: %d %s", status, page)
	}
	if got := whoamiRaw(t, b); got != "alice" {
		t.Fatalf("replica B after alice authorized at A: %q", got)
	}
	// The used link, opened at replica B this time: refused there too.
	resp, err := http.Get(strings.Replace(el.URL, e.base, "http://"+ln.Addr().String(), 1))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(page), "already used") {
		t.Fatalf("the used link at the other replica: %d %.200s", resp.StatusCode, page)
	}
}
