package credentials_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/host"
)

const (
	oauthClientID     = "mcpgw-test"
	oauthClientSecret = "client-secret-5d3e9a7b1c"
	oauthScope        = "repo:read"
	downstreamToken   = "downstream-token-3c2b1a09"
)

// tokenEndpoint is an OAuth authorization server's token endpoint for the
// client-credentials grant. It checks the grant, the client's credentials
// (HTTP Basic), the scope and the RFC 8707 resource, counts requests and
// issues tokens that live for ttl.
type tokenEndpoint struct {
	t        *testing.T
	resource string // the resource parameter it requires
	ttl      time.Duration
	down     atomic.Bool // answer 503 to everything

	mu       sync.Mutex
	requests int
	expiry   map[string]time.Time // issued token -> expiry
	problems []string
	srv      *httptest.Server
}

func newTokenEndpoint(t *testing.T, ttl time.Duration) *tokenEndpoint {
	e := &tokenEndpoint{t: t, ttl: ttl, expiry: map[string]time.Time{}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, p := range e.problems {
			t.Errorf("token endpoint: %s", p)
		}
	})
	return e
}

func (e *tokenEndpoint) url() string { return e.srv.URL + "/oauth2/token" }

func (e *tokenEndpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests
}

// valid reports whether tok was issued here and has not expired.
func (e *tokenEndpoint) valid(tok string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.expiry[tok]
	return ok && time.Now().Before(exp)
}

func (e *tokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.requests++
	n := e.requests
	e.mu.Unlock()
	fail := func(status int, code, problem string) {
		if problem != "" {
			e.mu.Lock()
			e.problems = append(e.problems, problem)
			e.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":%q}`, code)
	}
	if e.down.Load() {
		fail(http.StatusServiceUnavailable, "temporarily_unavailable", "")
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/oauth2/token" || r.URL.RawQuery != "" {
		fail(http.StatusBadRequest, "invalid_request", fmt.Sprintf("%s %s", r.Method, r.URL))
		return
	}
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id, secret, ok := r.BasicAuth()
	switch {
	case r.PostForm.Get("grant_type") != "client_credentials":
		fail(http.StatusBadRequest, "unsupported_grant_type", "grant_type="+r.PostForm.Get("grant_type"))
	case !ok || id != oauthClientID || secret != oauthClientSecret || r.PostForm.Has("client_secret"):
		fail(http.StatusUnauthorized, "invalid_client", fmt.Sprintf("client authentication: basic=%v id=%q", ok, id))
	case r.PostForm.Get("scope") != oauthScope:
		fail(http.StatusBadRequest, "invalid_scope", "scope="+r.PostForm.Get("scope"))
	case e.resource != "" && (len(r.PostForm["resource"]) != 1 || r.PostForm.Get("resource") != e.resource):
		fail(http.StatusBadRequest, "invalid_target", fmt.Sprintf("resource=%q, want %q", r.PostForm["resource"], e.resource))
	default:
		tok := fmt.Sprintf("upstream-token-%d", n)
		e.mu.Lock()
		e.expiry[tok] = time.Now().Add(e.ttl)
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(e.ttl / time.Second)})
	}
}

// bearerUpstream is an official-SDK MCP server behind a middleware that
// lets through only requests carrying a live token from the token endpoint,
// and records what every request carried.
type bearerUpstream struct {
	tokens *tokenEndpoint
	mu     sync.Mutex
	seen   []string // "METHOD Authorization"
	bad    []string // requests refused
	url    string
}

func newBearerUpstream(t *testing.T, name string, tokens *tokenEndpoint, sse bool) *bearerUpstream {
	u := &bearerUpstream{tokens: tokens}
	srv := gatewaytest.SDKServer(name, 10)
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if sse {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		u.mu.Lock()
		u.seen = append(u.seen, r.Method+" "+auth)
		u.mu.Unlock()
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || !tokens.valid(tok) || len(r.Header.Values("Authorization")) != 1 {
			u.mu.Lock()
			u.bad = append(u.bad, r.Method+" "+auth)
			u.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	tokens.resource = u.url
	return u
}

func (u *bearerUpstream) requests() (seen, bad []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...), append([]string(nil), u.bad...)
}

// oauthGateway starts a gateway from yaml with its logs captured.
func oauthGateway(t *testing.T, yaml string) (*gateway.Gateway, string, *gatewaytest.SyncBuffer) {
	t.Helper()
	return oauthGatewayAt(t, yaml, nil)
}

// oauthGatewayAt is oauthGateway whose upstream tokens expire by now.
func oauthGatewayAt(t *testing.T, yaml string, now func() time.Time) (*gateway.Gateway, string, *gatewaytest.SyncBuffer) {
	t.Helper()
	cfg, err := config.Parse("oauth.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &gatewaytest.SyncBuffer{}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logs), zapcore.DebugLevel)
	gw := gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core())), Listener: ln, Now: now})
	return gw, "http://" + ln.Addr().String(), logs
}

func TestUpstreamOAuthClientCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		sse       bool
		transport string
	}{{"streamable", false, ""}, {"legacy sse", true, "\n    transport: sse"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tokens := newTokenEndpoint(t, 4*time.Second)
			clock := gatewaytest.NewClock(time.Now())
			up := newBearerUpstream(t, "oa", tokens, tc.sse)
			secretFile := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(secretFile, []byte(oauthClientSecret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs *gatewaytest.SyncBuffer
			// Registered first, so it runs after the gateway shut down
			// (the DELETE of the upstream session included).
			t.Cleanup(func() {
				seen, bad := up.requests()
				if len(bad) > 0 {
					t.Errorf("the upstream refused %d requests: %q", len(bad), bad)
				}
				methods := map[string]bool{}
				for _, s := range seen {
					method, auth, _ := strings.Cut(s, " ")
					methods[method] = true
					if strings.Contains(auth, downstreamToken) || !strings.HasPrefix(auth, "Bearer upstream-token-") {
						t.Errorf("the upstream saw %q", s)
					}
				}
				want := []string{http.MethodPost, http.MethodGet}
				if !tc.sse {
					want = append(want, http.MethodDelete)
				}
				for _, m := range want {
					if !methods[m] {
						t.Errorf("no %s request reached the upstream (saw %q); every method must carry the token", m, seen)
					}
				}
				if l := logs.String(); strings.Contains(l, oauthClientSecret) || strings.Contains(l, "upstream-token-") {
					t.Error("a secret or an upstream token was logged")
				}
			})
			var base string
			_, base, logs = oauthGatewayAt(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  oa:
    url: %s%s
    oauth:
      token_url: %s
      client_id: %s
      client_secret_file: %s
      scopes: [%s]
      auth_method: client_secret_basic
  beta:
    url: %s
`, up.url, tc.transport, tokens.url(), oauthClientID, secretFile, oauthScope, gatewaytest.HTTPUpstream(t, "beta", 0)), clock.Now)

			// The downstream client sends its own token; it must never reach the upstream.
			cs, err := gatewaytest.ConnectWith(t, base+"/mcp", downstreamToken, "")
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if got := gatewaytest.Echo(t, cs, "oa__echo"); got != "oa:hi" {
					t.Fatalf("oa__echo = %q", got)
				}
			}
			if n := tokens.count(); n != 1 {
				t.Errorf("%d token requests for one connection and three calls, want 1 (the token is reused)", n)
			}
			// A 4s token is replaced a quarter of its life early: after 3.2s
			// (of the gateway's clock; the token endpoint's is the wall's,
			// on which the old token is still valid).
			clock.Advance(3300 * time.Millisecond)
			if got := gatewaytest.Echo(t, cs, "oa__echo"); got != "oa:hi" {
				t.Fatalf("oa__echo after expiry = %q", got)
			}
			if n := tokens.count(); n != 2 {
				t.Errorf("%d token requests after the token expired, want 2", n)
			}
			if got := gatewaytest.Echo(t, cs, "beta__echo"); got != "beta:hi" {
				t.Errorf("beta__echo = %q", got)
			}
		})
	}
}

func TestUpstreamOAuthTokenEndpointDown(t *testing.T) {
	t.Parallel()
	tokens := newTokenEndpoint(t, time.Hour)
	tokens.down.Store(true)
	up := newBearerUpstream(t, "oa", tokens, false)
	gw, base, logs := oauthGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  oa:
    url: %s
    startup_timeout: 5s
    oauth:
      token_url: %s
      client_id: %s
      client_secret: %s
      scopes: [%s]
  beta:
    url: %s
`, up.url, tokens.url(), oauthClientID, oauthClientSecret, oauthScope, gatewaytest.HTTPUpstream(t, "beta", 0)))

	state, cause := gw.Host().Upstream("oa").State()
	if state == host.StateReady || cause == nil {
		t.Fatalf("oa is %s (%v) with its token endpoint down", state, cause)
	}
	for _, want := range []string{`upstream "oa"`, tokens.url(), "HTTP 503", "temporarily_unavailable"} {
		if !strings.Contains(cause.Error(), want) {
			t.Errorf("the upstream's error %q lacks %q", cause, want)
		}
	}
	if seen, _ := up.requests(); len(seen) > 0 {
		t.Errorf("requests reached the upstream without a token: %q", seen)
	}

	cs := gatewaytest.Connect(t, base+"/mcp", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "oa__echo", Arguments: map[string]any{"text": "hi"}})
	// The caller is told which upstream and the request id; why (the token
	// endpoint's answer) is in the log, as the upstream's state above.
	if err == nil || !strings.Contains(err.Error(), `"oa"`) || !strings.Contains(err.Error(), "request id ") || strings.Contains(err.Error(), tokens.url()) || strings.Contains(err.Error(), oauthClientSecret) {
		t.Errorf("oa__echo with the token endpoint down: err = %v, want one naming the upstream and the request id", err)
	}
	if got := gatewaytest.Echo(t, cs, "beta__echo"); got != "beta:hi" {
		t.Errorf("beta__echo = %q while oa is down", got)
	}

	// The supervisor retries; once the token endpoint is back, so is oa.
	tokens.down.Store(false)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if s, _ := gw.Host().Upstream("oa").State(); s == host.StateReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("oa did not recover after the token endpoint came back")
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
	if got := gatewaytest.Echo(t, cs, "oa__echo"); got != "oa:hi" {
		t.Errorf("oa__echo after recovery = %q", got)
	}
	if strings.Contains(logs.String(), oauthClientSecret) {
		t.Error("the client secret was logged")
	}
}
