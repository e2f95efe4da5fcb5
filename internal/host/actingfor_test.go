package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/host"
)

// userSource is a per-user credentials.Source as the hook gets one: each
// principal's token is "tok-<subject>", except that a stale one is
// handed out first for the subjects in stale (an upstream refuses it).
type userSource struct {
	mu      sync.Mutex
	stale   map[string]bool
	refused []string
	// mustAuthorize are the subjects who must authorize the gateway first.
	mustAuthorize map[string]bool
}

func (s *userSource) Kind() credentials.Kind { return credentials.KindPerUser }

func (s *userSource) Token(_ context.Context, sub credentials.Subject) (string, error) {
	if sub.Principal == nil {
		return "", errors.New("no principal")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mustAuthorize[sub.Principal.Subject] {
		return "", &credentials.AuthorizationRequiredError{Upstream: "u", URL: "https://mcp.example.com/oauth/upstream/u/start?s=1", ElicitationID: "e-" + sub.Principal.Subject}
	}
	if s.stale[sub.Principal.Subject] {
		return "stale-" + sub.Principal.Subject, nil
	}
	return "tok-" + sub.Principal.Subject, nil
}

func (s *userSource) Refused(_ context.Context, sub credentials.Subject, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = append(s.refused, token)
	delete(s.stale, sub.Principal.Subject)
}

// userBoundUpstream is an official-SDK server that accepts "tok-<user>" as
// user, binds each session to its user (the SDK refuses a session used
// with another user's token), and answers whoami with the user.
func userBoundUpstream(t *testing.T) (string, func() []string) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "users", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	verify := func(_ context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		user, ok := strings.CutPrefix(token, "tok-")
		if !ok {
			return nil, sdkauth.ErrInvalidToken
		}
		return &sdkauth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := sdkauth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	var mu sync.Mutex
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func principal(name string) *auth.Principal {
	return &auth.Principal{Subject: name, Issuer: "https://idp.example.com"}
}

// TestActingForConnections proves the connection rules of an upstream
// whose requests act for their caller (here through the
// Options.CredentialSource hook, as the per-user source plugs in): one
// connection per session and per stateless principal, each carrying only
// its own principal's token; a session's connection is never used for
// another principal; a 401 makes the Source drop the token and the
// request go once more; without oauth or headers there is no shared
// connection.
func TestActingForConnections(t *testing.T) {
	url, seen := userBoundUpstream(t)
	src := &userSource{stale: map[string]bool{"carol": true}, mustAuthorize: map[string]bool{"dave": true}}
	cfg := &config.Config{Separator: "__", Upstreams: map[string]*config.Upstream{"u": {URL: url}}}
	h := host.New(cfg, host.Options{
		Logger: zaptest.NewLogger(t),
		CredentialSource: func(_ context.Context, name string, _ *config.Upstream) (credentials.Source, error) {
			if name != "u" {
				return nil, nil
			}
			return src, nil
		},
	})
	h.Start()
	t.Cleanup(h.Close)
	u := h.Upstream("u")
	if k := u.CredentialKind(); k != credentials.KindPerUser || !u.ActsForCaller() {
		t.Fatalf("kind %q, acts for caller %v", k, u.ActsForCaller())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Client(ctx); err == nil || !strings.Contains(err.Error(), "acts for each caller") {
		t.Errorf("shared client: %v, want none (no credential of its own)", err)
	}

	as := func(p *auth.Principal, session string) context.Context {
		return host.WithSession(auth.WithPrincipal(ctx, p), session)
	}
	call := func(cctx context.Context) (string, *client.Client, error) {
		c, err := u.ClientFor(cctx, true)
		if err != nil {
			return "", nil, err
		}
		resp, err := c.Call(cctx, "tools/call", json.RawMessage(`{"name":"whoami","arguments":{}}`), client.CallOptions{})
		if err != nil {
			return "", c, err
		}
		if resp.Error != nil {
			return "", c, fmt.Errorf("%s", resp.Error.Message)
		}
		var res struct {
			Content []struct{ Text string } `json:"content"`
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil || len(res.Content) != 1 {
			return "", c, fmt.Errorf("result %s", resp.Result)
		}
		return res.Content[0].Text, c, nil
	}

	conns := map[string]*client.Client{}
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		want    string
		sameAs  string // the connection it must reuse ("": a new one)
		connKey string
	}{
		{"alice's session", as(principal("alice"), "s1"), "alice", "", "s1"},
		{"bob's session", as(principal("bob"), "s2"), "bob", "", "s2"},
		{"alice stateless", auth.WithPrincipal(ctx, principal("alice")), "alice", "", "alice"},
		{"alice stateless again", auth.WithPrincipal(ctx, principal("alice")), "alice", "alice", "alice"},
		{"alice's session again", as(principal("alice"), "s1"), "alice", "s1", "s1"},
		{"carol, whose first token the upstream refuses", as(principal("carol"), "s3"), "carol", "", "s3"},
	} {
		got, c, err := call(tc.ctx)
		if err != nil || got != tc.want {
			t.Errorf("%s: whoami = %q, %v; want %q", tc.name, got, err, tc.want)
			continue
		}
		if tc.sameAs != "" && conns[tc.sameAs] != c {
			t.Errorf("%s: a new connection, want %s's", tc.name, tc.sameAs)
		}
		if tc.sameAs == "" {
			for k, other := range conns {
				if other == c {
					t.Errorf("%s: reused %s's connection", tc.name, k)
				}
			}
		}
		conns[tc.connKey] = c
	}
	if n := u.SessionConnections(); n != 4 {
		t.Errorf("%d connections, want 4 (s1, s2, alice stateless, s3)", n)
	}
	if _, _, err := call(as(principal("bob"), "s1")); err == nil || !strings.Contains(err.Error(), "another principal") {
		t.Error("bob's request was served on alice's session connection")
	}
	if _, _, err := call(ctx); err == nil {
		t.Error("a request without a principal was served by an acting-for upstream")
	}
	src.mu.Lock()
	refused := append([]string(nil), src.refused...)
	src.mu.Unlock()
	if len(refused) != 1 || refused[0] != "stale-carol" {
		t.Errorf("refused tokens %q, want [stale-carol] (the 401 reported once, then retried)", refused)
	}
	for _, s := range seen() {
		if _, auth, _ := strings.Cut(s, " "); auth == "" {
			t.Errorf("a request without a credential reached the upstream: %q", s)
		}
	}
	// A user who must authorize first gets the Source's
	// AuthorizationRequiredError unchanged, before a connection exists and
	// on one that does.
	var are *credentials.AuthorizationRequiredError
	if _, _, err := call(as(principal("dave"), "s4")); !errors.As(err, &are) || are.ElicitationID != "e-dave" {
		t.Errorf("dave, who must authorize: %v (%T), want the AuthorizationRequiredError", err, err)
	}
	src.mu.Lock()
	src.mustAuthorize["bob"] = true
	src.mu.Unlock()
	if _, _, err := call(as(principal("bob"), "s2")); !errors.As(err, &are) || are.ElicitationID != "e-bob" {
		t.Errorf("bob's session after his authorization was dropped: %v (%T), want the AuthorizationRequiredError", err, err)
	}
	h.ReleaseSession("s1", true)
	if n := u.SessionConnections(); n != 3 {
		t.Errorf("%d connections after s1 ended, want 3", n)
	}

	// A stateless principal's connection has no session end: it is closed
	// once unused for 10 minutes, and a later call makes a new one.
	src.mu.Lock()
	delete(src.mustAuthorize, "bob") // he authorized again
	src.mu.Unlock()
	var mu sync.Mutex
	now := time.Now()
	host.SetSessionClock(u, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	if _, c, err := call(auth.WithPrincipal(ctx, principal("alice"))); err != nil || c != conns["alice"] {
		t.Fatalf("alice stateless: %v, same connection %v", err, c == conns["alice"])
	}
	mu.Lock()
	now = now.Add(11 * time.Minute)
	mu.Unlock()
	if got, _, err := call(as(principal("bob"), "s2")); err != nil || got != "bob" { // any handout reaps
		t.Fatalf("bob after 11 minutes: %q, %v", got, err)
	}
	if n := u.SessionConnections(); n != 2 {
		t.Errorf("%d connections after alice's stateless one idled 11 minutes, want 2 (s2, s3)", n)
	}
	if got, c, err := call(auth.WithPrincipal(ctx, principal("alice"))); err != nil || got != "alice" || c == conns["alice"] {
		t.Errorf("alice stateless again: %q, %v, reused the closed connection %v", got, err, c == conns["alice"])
	}
}

// TestActingForWithOwnCredential: an acting-for upstream that also has a
// credential of its own (here an Authorization header) keeps a shared
// connection with it for the catalog's lists, while calls act for the
// caller on the caller's own connection.
func TestActingForWithOwnCredential(t *testing.T) {
	url, seen := userBoundUpstream(t)
	src := &userSource{}
	cfg := &config.Config{Separator: "__", Upstreams: map[string]*config.Upstream{"u": {URL: url, Headers: map[string]string{"Authorization": "Bearer tok-service"}}}}
	h := host.New(cfg, host.Options{
		Logger: zaptest.NewLogger(t),
		CredentialSource: func(context.Context, string, *config.Upstream) (credentials.Source, error) {
			return src, nil
		},
	})
	h.Start()
	t.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	u := h.Upstream("u")
	shared, err := u.Client(ctx)
	if err != nil {
		t.Fatalf("shared connection: %v", err)
	}
	alice := host.WithSession(auth.WithPrincipal(ctx, principal("alice")), "s1")
	if lc, err := u.ListClient(alice); err != nil || lc != shared {
		t.Errorf("alice's list: %v, shared connection %v; want the shared one", err, lc == shared)
	}
	cc, err := u.ClientFor(alice, true)
	if err != nil || cc == shared {
		t.Fatalf("alice's call: %v, shared connection %v; want her own", err, cc == shared)
	}
	resp, err := cc.Call(alice, "tools/call", json.RawMessage(`{"name":"whoami","arguments":{}}`), client.CallOptions{})
	if err != nil || resp.Error != nil || !strings.Contains(string(resp.Result), `"alice"`) {
		t.Errorf("alice's call: %v %+v", err, resp)
	}
	var service, user int
	for _, s := range seen() {
		switch {
		case strings.HasSuffix(s, " Bearer tok-service"):
			service++
		case strings.HasSuffix(s, " Bearer tok-alice"):
			user++
		default:
			t.Errorf("the upstream saw %q", s)
		}
	}
	if service == 0 || user == 0 {
		t.Errorf("%d requests with the service token, %d with alice's; want both", service, user)
	}
}
