package router_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/auth/authtest"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/sse"
)

const (
	authAPIKey        = "ci-key-4f9a0c1d2e3b4a5c6d7e8f90"
	authUpstreamCred  = "Bearer upstream-credential-7e1f2a"
	authCookie        = gatewaytest.AuthCookie
	authAdminScope    = "mcp:admin"
	authRequiredScope = "mcp:tools"
)

// headerRecorder keeps the headers and bodies of every request an upstream
// received.
type headerRecorder struct {
	mu     sync.Mutex
	all    []http.Header
	bodies []string
}

func (h *headerRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.mu.Lock()
		h.all = append(h.all, r.Header.Clone())
		h.bodies = append(h.bodies, string(b))
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// saw reports whether any request body contained s.
func (h *headerRecorder) saw(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bodies {
		if strings.Contains(b, s) {
			return true
		}
	}
	return false
}

func (h *headerRecorder) headers() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.all...)
}

type authEnv struct {
	base   string // http://127.0.0.1:PORT
	issuer *authtest.Issuer
	rec    *headerRecorder
	logs   *gatewaytest.SyncBuffer
	tokens []string // every token handed out, to grep logs for
	mu     sync.Mutex
	// metrics is the gateway's registry, to grep its exposition for secrets.
	metrics *prometheus.Registry
}

// token signs a token for sub with the given audience and scopes, and
// remembers it.
func (e *authEnv) token(sub, aud string, scopes ...string) string {
	return e.sign(e.issuer.Claims(sub, aud, scopes...))
}

func (e *authEnv) sign(c map[string]any) string {
	tok := e.issuer.Token(c)
	e.mu.Lock()
	e.tokens = append(e.tokens, tok)
	e.mu.Unlock()
	return tok
}

// authGateway starts a gateway that authenticates with an in-process OIDC
// issuer and an API key, over a recording HTTP upstream "rec" (with a
// configured upstream credential) and a fidelity upstream "up" (for the
// 2026 bridge). Logs, debug level included, are captured.
func authGateway(t *testing.T) *authEnv {
	t.Helper()
	e := &authEnv{issuer: authtest.NewIssuer(t), rec: &headerRecorder{}, logs: &gatewaytest.SyncBuffer{}}
	srv := gatewaytest.SDKServer("rec", 10)
	ts := httptest.NewServer(e.rec.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	t.Cleanup(ts.Close)
	up := gatewaytest.FidHTTPUpstream(t, "up", 0)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.base = "http://" + ln.Addr().String()
	yaml := fmt.Sprintf(`
listen: %s
public_url: %s
upstreams:
  rec:
    url: %s/mcp
    headers: {Authorization: %q}
%sroutes:
  - path: /mcp
  - path: /mcp/admin
    upstreams: [rec]
    scopes: [%s]
auth:
  oidc: {issuer: %q}
  required_scopes: [%s]
  api_keys:
    - {name: ci, key: %q, principal: ci-bot, groups: [automation], scopes: [%s]}
policy:
  default: allow   # with auth configured the default is deny; these tests are about identity
`, ln.Addr(), e.base, ts.URL, authUpstreamCred, up.Entry, authAdminScope, e.issuer.URL, authRequiredScope, authAPIKey, authRequiredScope)
	cfg, err := config.Parse("auth.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(e.logs), zapcore.DebugLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
	e.metrics = prometheus.NewRegistry()
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: log, Listener: ln, Auth: auth.Options{KeyRefreshInterval: time.Millisecond},
		Metrics: metrics.New(e.metrics, metrics.Options{NoRuntimeCollectors: true})})
	return e
}

func TestAuthEndToEnd(t *testing.T) {
	t.Parallel()
	e := authGateway(t)
	mcpURL := e.base + "/mcp"
	resource := mcpURL
	metaURL := e.base + "/.well-known/oauth-protected-resource/mcp"
	alice := e.token("alice", resource, authRequiredScope)
	bob := e.token("bob", resource, authRequiredScope)

	t.Run("no token: 401 with the metadata URL, on every endpoint", func(t *testing.T) {
		want := `Bearer resource_metadata="` + metaURL + `", scope="` + authRequiredScope + `"`
		for _, tc := range []struct{ method, path, body string }{
			{http.MethodPost, "/mcp", gatewaytest.InitBody},
			{http.MethodGet, "/mcp", ""},
			{http.MethodDelete, "/mcp", ""},
			{http.MethodGet, "/mcp/sse", ""},
			{http.MethodPost, "/mcp/message?sessionId=x", gatewaytest.InitBody},
		} {
			c := &gatewaytest.RawClient{T: t, URL: e.base + tc.path, Header: http.Header{"Cookie": {authCookie}}}
			r := c.Do(tc.method, tc.body, nil)
			if r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") != want {
				t.Errorf("%s %s: HTTP %d, WWW-Authenticate %q; want 401, %q", tc.method, tc.path, r.Status, r.Header.Get("WWW-Authenticate"), want)
			}
			if m := r.Last(t); m.Error == nil || !strings.Contains(m.Error.Message, "unauthorized") {
				t.Errorf("%s %s: body %s", tc.method, tc.path, r.Body)
			}
		}
	})

	t.Run("metadata documents", func(t *testing.T) {
		for url, want := range map[string]string{
			metaURL: `{"resource":"` + resource + `","authorization_servers":["` + e.issuer.URL + `"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"]}`,
			e.base + "/.well-known/oauth-protected-resource/mcp/admin": `{"resource":"` + resource + `/admin","authorization_servers":["` + e.issuer.URL + `"],"scopes_supported":["mcp:tools","mcp:admin"],"bearer_methods_supported":["header"]}`,
			e.base + "/.well-known/oauth-protected-resource":           `{"resource":"` + e.base + `","authorization_servers":["` + e.issuer.URL + `"],"scopes_supported":["mcp:tools","mcp:admin"],"bearer_methods_supported":["header"]}`,
		} {
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != want || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("GET %s: HTTP %d %s\nwant %s", url, resp.StatusCode, b, want)
			}
		}
		if resp, err := http.Get(e.base + "/.well-known/oauth-protected-resource/nope"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("unknown resource: %v %v", resp.StatusCode, err)
		}
	})

	t.Run("authentication happens before the body is read", func(t *testing.T) {
		// A body beyond max_body_bytes would get 413 once read.
		c := &gatewaytest.RawClient{T: t, URL: mcpURL}
		if r := c.Post(strings.Repeat(" ", 5<<20) + gatewaytest.InitBody); r.Status != http.StatusUnauthorized {
			t.Errorf("oversized body without a token: HTTP %d, want 401", r.Status)
		}
	})

	t.Run("rejected tokens", func(t *testing.T) {
		expired := e.issuer.Claims("alice", resource, authRequiredScope)
		expired["exp"] = time.Now().Add(-time.Hour).Unix()
		for name, tc := range map[string]struct {
			header http.Header
			query  string
			status int
			want   string
		}{
			"another audience": {gatewaytest.Bearer(e.token("alice", "https://other.example.com/mcp", authRequiredScope)), "", 401, `error="invalid_token"`},
			"expired":          {gatewaytest.Bearer(e.sign(expired)), "", 401, `error="invalid_token", error_description="the token expired at`},
			"alg none":         {gatewaytest.Bearer(authtest.Unsigned(e.issuer.Claims("alice", resource, authRequiredScope))), "", 401, `error="invalid_token"`},
			"wrong api key":    {http.Header{"X-Api-Key": {authAPIKey + "x"}}, "", 401, `error="invalid_token"`},
			"token in query":   {nil, "?access_token=" + alice, 400, `error="invalid_request"`},
		} {
			c := &gatewaytest.RawClient{T: t, URL: mcpURL + tc.query, Header: tc.header}
			r := c.Post(gatewaytest.InitBody)
			if got := r.Header.Get("WWW-Authenticate"); r.Status != tc.status || !strings.HasPrefix(got, `Bearer resource_metadata="`+metaURL+`", `+tc.want) {
				t.Errorf("%s: HTTP %d, WWW-Authenticate %q; want %d, %s", name, r.Status, got, tc.status, tc.want)
			}
		}
	})

	t.Run("valid token: the official SDK works", func(t *testing.T) {
		for _, version := range []string{"2025-11-25", "2025-06-18", ""} {
			cs, err := gatewaytest.ConnectWith(t, mcpURL, alice, version)
			if err != nil {
				t.Fatalf("version %q: %v", version, err)
			}
			if got := gatewaytest.Echo(t, cs, "rec__echo"); got != "rec:hi" {
				t.Errorf("version %q: echo = %q", version, got)
			}
		}
	})

	t.Run("API key works", func(t *testing.T) {
		cs, err := gatewaytest.ConnectWith(t, mcpURL, authAPIKey, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := gatewaytest.Echo(t, cs, "rec__echo"); got != "rec:hi" {
			t.Errorf("echo = %q", got)
		}
	})

	t.Run("insufficient scope: 403 naming what the route needs", func(t *testing.T) {
		noScope := e.token("carol", resource)
		c := &gatewaytest.RawClient{T: t, URL: mcpURL, Header: gatewaytest.Bearer(noScope)}
		r := c.Post(gatewaytest.InitBody)
		want := `Bearer resource_metadata="` + metaURL + `", error="insufficient_scope", error_description="the credential lacks scope mcp:tools", scope="mcp:tools"`
		if r.Status != http.StatusForbidden || r.Header.Get("WWW-Authenticate") != want {
			t.Errorf("HTTP %d, %q\nwant 403 %q", r.Status, r.Header.Get("WWW-Authenticate"), want)
		}
		admin := mcpURL + "/admin"
		c = &gatewaytest.RawClient{T: t, URL: admin, Header: gatewaytest.Bearer(e.token("alice", admin, authRequiredScope))}
		r = c.Post(gatewaytest.InitBody)
		if r.Status != http.StatusForbidden || !strings.HasSuffix(r.Header.Get("WWW-Authenticate"), `scope="mcp:tools mcp:admin"`) {
			t.Errorf("admin route: HTTP %d, %q", r.Status, r.Header.Get("WWW-Authenticate"))
		}
		cs, err := gatewaytest.ConnectWith(t, admin, e.token("alice", admin, authRequiredScope, authAdminScope), "2025-11-25")
		if err != nil {
			t.Fatal(err)
		}
		if got := gatewaytest.Echo(t, cs, "rec__echo"); got != "rec:hi" {
			t.Errorf("admin echo = %q", got)
		}
		// The API key lacks mcp:admin.
		if _, err := gatewaytest.ConnectWith(t, admin, authAPIKey, "2025-11-25"); err == nil {
			t.Error("API key without mcp:admin connected to /mcp/admin")
		}
	})

	t.Run("a session used by another principal is not found", func(t *testing.T) {
		owner := &gatewaytest.RawClient{T: t, URL: mcpURL, Header: gatewaytest.Bearer(alice)}
		owner.Initialize("2025-11-25")
		call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"rec__echo","arguments":{"text":"from-intruder"}}}`
		for name, h := range map[string]http.Header{
			"bob":               gatewaytest.Bearer(bob),
			"alice's other iss": gatewaytest.Bearer(authtest.NewIssuer(t).Token(e.issuer.Claims("alice", resource, authRequiredScope))),
			"api key":           {"X-Api-Key": {authAPIKey}},
		} {
			other := &gatewaytest.RawClient{T: t, URL: mcpURL, Session: owner.Session, Header: h}
			for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				r := other.Do(method, call, nil)
				want := http.StatusNotFound
				if name == "alice's other iss" {
					want = http.StatusUnauthorized // a foreign issuer is refused first
				}
				if r.Status != want {
					t.Errorf("%s %s on alice's session: HTTP %d %s, want %d", name, method, r.Status, r.Body, want)
				}
			}
		}
		if e.rec.saw("from-intruder") {
			t.Error("another principal's call on alice's session reached the upstream")
		}
		// Alice's session is intact, and a new token of hers is still her.
		owner.Header = gatewaytest.Bearer(e.token("alice", resource, authRequiredScope))
		if r := owner.Post(strings.ReplaceAll(call, "from-intruder", "from-alice")); r.Status != http.StatusOK || r.Last(t).Error != nil {
			t.Errorf("alice's own call: HTTP %d %s", r.Status, r.Body)
		}
	})

	t.Run("2026 stateless requests are authenticated", func(t *testing.T) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__echo","arguments":{"text":"hi"},` + meta + `}}`
		h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"rec__echo"}}
		r := (&gatewaytest.RawClient{T: t, URL: mcpURL, Header: h.Clone()}).Post(body)
		if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), `Bearer resource_metadata=`) {
			t.Errorf("without a token: HTTP %d %s", r.Status, r.Body)
		}
		h.Set("Authorization", "Bearer "+alice)
		r = (&gatewaytest.RawClient{T: t, URL: mcpURL, Header: h}).Post(body)
		if m := r.Last(t); r.Status != http.StatusOK || m.Error != nil || !strings.Contains(string(m.Result), "rec:hi") {
			t.Errorf("with a token: HTTP %d %s", r.Status, r.Body)
		}
	})

	t.Run("a parked 2026 call resumes only for its principal", func(t *testing.T) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
		post := func(token, extra string) *gatewaytest.RawResponse {
			h := gatewaytest.Bearer(token)
			h.Set("Mcp-Protocol-Version", "2026-07-28")
			h.Set("Mcp-Method", "tools/call")
			h.Set("Mcp-Name", "up__sample")
			return (&gatewaytest.RawClient{T: t, URL: mcpURL, Header: h}).Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__sample","arguments":{"tag":"X"},` + meta + extra + `}}`)
		}
		var ir struct {
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		}
		if err := json.Unmarshal(post(alice, "").Last(t).Result, &ir); err != nil || len(ir.InputRequests) != 1 {
			t.Fatalf("first round: %v %+v", err, ir)
		}
		var key string
		for k := range ir.InputRequests {
			key = k
		}
		retry := `,"inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"forty-two"}}},"requestState":"` + ir.RequestState + `"`
		r := post(bob, retry)
		if r.Status != http.StatusBadRequest || !strings.Contains(gatewaytest.ErrorOf(t, r).Message, "another principal") {
			t.Errorf("bob resuming alice's call: HTTP %d %s", r.Status, r.Body)
		}
		if m := post(alice, retry).Last(t); m.Error != nil || !strings.Contains(string(m.Result), "answer=forty-two") {
			t.Errorf("alice resuming: %s %v", m.Result, m.Error)
		}
	})

	t.Run("a legacy SSE session belongs to who opened it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, mcpURL+"/sse", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+alice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /mcp/sse: HTTP %d", resp.StatusCode)
		}
		events := sse.NewReader(bufio.NewReader(resp.Body), 1<<20)
		ev, err := events.Next()
		if err != nil || ev.Name != "endpoint" {
			t.Fatalf("first event %+v %v", ev, err)
		}
		endpoint := e.base + string(ev.Data)
		as := func(tok string) func(*http.Request) {
			return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
		}
		if status, _ := gatewaytest.LegacyPost(t, endpoint, gatewaytest.InitBody, as(bob)); status != http.StatusNotFound {
			t.Errorf("bob posting to alice's legacy session: HTTP %d", status)
		}
		if status, _ := gatewaytest.LegacyPost(t, endpoint, gatewaytest.InitBody, as(alice)); status != http.StatusAccepted {
			t.Errorf("alice posting: HTTP %d", status)
		}
		if m := gatewaytest.NextMessage(t, events); m.Error != nil || !strings.Contains(string(m.Result), "protocolVersion") {
			t.Errorf("initialize on the stream: %s %v", m.Result, m.Error)
		}
	})

	t.Run("no token passthrough", func(t *testing.T) {
		hs := e.rec.headers()
		if len(hs) == 0 {
			t.Fatal("the upstream saw no request")
		}
		e.mu.Lock()
		tokens := append([]string{authAPIKey}, e.tokens...)
		e.mu.Unlock()
		for _, h := range hs {
			if got := h.Get("Authorization"); got != authUpstreamCred {
				t.Errorf("upstream saw Authorization %q, want the configured credential", got)
			}
			if c := h.Values("Cookie"); len(c) > 0 {
				t.Errorf("upstream saw Cookie %q", c)
			}
			for k, vs := range h {
				for _, v := range vs {
					for _, tok := range tokens {
						if strings.Contains(v, tok) {
							t.Errorf("upstream saw a downstream credential in %s", k)
						}
					}
				}
			}
		}
	})

	t.Run("no secret in the logs or metrics", func(t *testing.T) {
		var exposition strings.Builder
		mfs, err := e.metrics.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&exposition, mf); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(exposition.String(), "mcpgw_") {
			t.Fatalf("no mcpgw series gathered:\n%.500s", exposition.String())
		}
		logs := e.logs.String() + exposition.String()
		if !strings.Contains(logs, "request refused by authentication") {
			t.Fatalf("refusals were not logged; captured:\n%.2000s", logs)
		}
		e.mu.Lock()
		secrets := append([]string{authAPIKey, authUpstreamCred, "upstream-credential-7e1f2a", authCookie, "downstream-cookie-9b8c7d"}, e.tokens...)
		e.mu.Unlock()
		for _, s := range secrets {
			if strings.Contains(logs, s) {
				t.Errorf("a secret appears in the logs or metrics: %.12s...", s)
			}
			// Nor the signature part alone.
			if parts := strings.Split(s, "."); len(parts) == 3 && strings.Contains(logs, parts[2]) {
				t.Errorf("a token signature appears in the logs")
			}
		}
	})
}

// TestNoAuthOnLoopbackOnly: without auth the gateway serves on loopback
// (every other test), refuses a non-loopback listener in validation, and
// starts one only with insecure_no_auth, warning loudly.
func TestNoAuthOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	_, err := config.Parse("x.yaml", []byte("listen: 0.0.0.0:8080\nupstreams: {fs: {command: [x]}}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "no authentication is configured") {
		t.Fatalf("non-loopback without auth: %v", err)
	}
	cfg, err := config.Parse("x.yaml", []byte("listen: 0.0.0.0:0\nauth: {insecure_no_auth: true}\nupstreams: {fs: {command: [x]}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &gatewaytest.SyncBuffer{}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logs), zapcore.DebugLevel))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: log, Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = gw.Shutdown(ctx)
	if !strings.Contains(logs.String(), "AUTHENTICATION IS OFF") {
		t.Errorf("no loud warning; logs:\n%s", logs)
	}
}
