package router_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// fwdUpstream is an HTTP upstream whose whoami tool answers with the
// X-Tenant and Authorization it was sent, and which records, for each of
// its own sessions, every tenant value it saw there.
type fwdUpstream struct {
	url string
	mu  sync.Mutex
	by  map[string][]string // upstream session id → X-Tenant values seen
	raw [][]byte            // every request head, for "never sent" checks
}

func newFwdUpstream(t *testing.T) *fwdUpstream {
	t.Helper()
	u := &fwdUpstream{by: map[string][]string{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "fwd", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Says what headers it got."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			h := req.Extra.Header
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: h.Get("X-Tenant") + "|" + h.Get("Authorization")}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var head bytes.Buffer
		_ = r.Header.Write(&head)
		u.mu.Lock()
		u.raw = append(u.raw, head.Bytes())
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			u.by[sid] = append(u.by[sid], r.Header.Get("X-Tenant"))
		}
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

// headerClient adds fixed headers (the API key and the forwarded ones) to
// every request.
type headerClient struct {
	h    http.Header
	base http.RoundTripper
}

func (c headerClient) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range c.h {
		r.Header[k] = vs
	}
	return c.base.RoundTrip(r)
}

// Issue 31, caller headers by explicit opt-in: two callers with different
// X-Tenant and personal tokens call one upstream at once; each call
// reaches the upstream with its own caller's values only (checked at the
// upstream, per upstream session), X-Pat arrives as Authorization, the
// gateway's own API key never goes upstream, no value is in the process
// log or the audit log, and the audit records name the forwarded headers.
func TestForwardedCallerHeadersStayWithTheirCaller(t *testing.T) {
	t.Parallel()
	up := newFwdUpstream(t)
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	cfg, err := config.Parse("test.yaml", []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  saas:
    url: %s
    forward_headers:
      - name: X-Tenant
      - {name: X-Pat, as: Authorization}
auth:
  api_keys:
    - {name: alice-key, key: alice-secret-0123456789, principal: alice}
    - {name: bob-key, key: bob-secret-0123456789, principal: bob}
policy:
  default: deny
  rules:
    - allow: ["saas__*"]
audit:
  output: %s
`, up.url, auditPath)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	var logBuf gatewaytest.SyncBuffer
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(&logBuf), zapcore.DebugLevel))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: logger, Listener: ln})
	url := "http://" + ln.Addr().String() + "/mcp"

	type caller struct{ key, tenant, pat string }
	callers := []caller{
		{"alice-secret-0123456789", "tenant-alice-7f3a", "pat-alice-91c2"},
		{"bob-secret-0123456789", "tenant-bob-55e1", "pat-bob-0d4b"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for _, c := range callers {
		for s := range 2 { // two sessions each
			wg.Go(func() {
				tr := &http.Transport{}
				defer tr.CloseIdleConnections()
				hc := &http.Client{Transport: headerClient{h: http.Header{
					"Authorization": {"Bearer " + c.key}, "X-Tenant": {c.tenant}, "X-Pat": {c.pat},
				}, base: tr}}
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "fwd-client", Version: "1"}, nil).Connect(ctx,
					&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
				if err != nil {
					errs <- fmt.Errorf("%s session %d: connect: %v", c.tenant, s, err)
					return
				}
				defer cs.Close()
				// The upstream has no shared connection (nothing of its own
				// to open one with): the caller's list goes through the
				// caller's own, as hosts list before they call.
				lt, err := cs.ListTools(ctx, nil)
				if err != nil || len(lt.Tools) != 1 || lt.Tools[0].Name != "saas__whoami" {
					errs <- fmt.Errorf("%s session %d: tools/list: %v %v", c.tenant, s, lt, err)
					return
				}
				for range 10 {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "saas__whoami", Arguments: map[string]any{}})
					if err != nil {
						errs <- fmt.Errorf("%s: call: %v", c.tenant, err)
						return
					}
					got := res.Content[0].(*mcp.TextContent).Text
					if want := c.tenant + "|" + c.pat; got != want {
						errs <- fmt.Errorf("%s: the upstream saw %q, want %q", c.tenant, got, want)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logBuf.String())
		}
	})
	for err := range errs {
		t.Error(err)
	}

	// At the upstream: every upstream session saw one caller's tenant only.
	up.mu.Lock()
	for sid, vals := range up.by {
		if distinct := slices.Compact(slices.Sorted(slices.Values(vals))); len(distinct) != 1 {
			t.Errorf("upstream session %s saw tenants %v: values of two callers on one connection", sid, distinct)
		}
	}
	if len(up.by) < 2 {
		t.Errorf("the upstream saw %d sessions, want at least one per caller (2)", len(up.by))
	}
	for _, head := range up.raw {
		for _, c := range callers {
			if bytes.Contains(head, []byte(c.key)) {
				t.Errorf("the upstream received the gateway's own API key of %s: %s", c.tenant, head)
			}
		}
		if bytes.Contains(head, []byte("X-Pat")) {
			t.Errorf("the upstream received X-Pat under its downstream name: %s", head)
		}
	}
	up.mu.Unlock()

	// Values never logged; audit names the headers.
	logs := logBuf.String()
	data, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range callers {
		for _, secret := range []string{c.tenant, c.pat} {
			if strings.Contains(logs, secret) {
				t.Errorf("the process log contains the forwarded value %q", secret)
			}
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("the audit log contains the forwarded value %q", secret)
			}
		}
	}
	recs := gatewaytest.AuditRecords(t, auditPath)
	var named int
	for _, r := range recs {
		if r["method"] != "tools/call" {
			continue
		}
		if fmt.Sprint(r["forwarded_headers"]) != "[X-Pat X-Tenant]" {
			t.Errorf("audit record without the forwarded header names: %v", r)
			break
		}
		named++
	}
	if named != 40 {
		t.Errorf("%d tools/call audit records name the forwarded headers, want 40", named)
	}
}
