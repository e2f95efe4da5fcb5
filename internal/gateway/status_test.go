package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"gopkg.in/yaml.v3"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// statusGateway runs a gateway with one ready upstream (alpha), one that
// is down (beta: nothing listens at its URL), secrets in its config, and
// pprof as asked.
func statusGateway(t *testing.T, pprof bool) (*gateway.Gateway, string, string) {
	t.Helper()
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	tp := sdktrace.NewTracerProvider() // tracing: below is shown, not exported
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	gw, base, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: "127.0.0.1:0", pprof: %v}
upstreams:
  alpha:
    url: %s
    headers: {Authorization: "Bearer upstream-secret-token-1"}
  beta:
    url: http://127.0.0.1:1/mcp
    startup_timeout: 1s
routes:
  - path: /mcp
  - path: /mcp/alpha
    upstreams: [alpha]
    prefix: false
auth:
  api_keys:
    - {name: ci, key: api-key-secret-0123456789, principal: ci-bot}
tracing:
  endpoint: http://127.0.0.1:4318
  headers: {Authorization: "Bearer tracing-secret-token-2"}
`, pprof, alpha), gateway.Options{TracerProvider: tp})
	// beta's first attempt has failed (gatewaytest.RunGateway waited for it).
	return gw, base, admin
}

var secrets = []string{"upstream-secret-token-1", "api-key-secret-0123456789", "tracing-secret-token-2"}

// The status page is HTML served by the binary, with no script and no
// external asset; it shows each upstream with its state (one is down),
// the routes with their catalog sizes, and the reload history. The JSON
// endpoints behind it say the same; /status/config is the config with
// every secret redacted; pprof is off unless asked.
func TestStatusPageAndEndpoints(t *testing.T) {
	gw, _, admin := statusGateway(t, false)

	resp, err := http.Get(admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	var page strings.Builder
	_, _ = fmt.Fprint(&page, readAll(t, resp))
	html := page.String()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	for _, want := range []string{
		`data-name="alpha" data-state="ready"`,
		`<tr class="route" data-path="/mcp">`, `<tr class="route" data-path="/mcp/alpha">`, "loaded", "2025-11-25",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("status page lacks %s", want)
		}
	}
	if !regexp.MustCompile(`data-name="beta" data-state="(down|breaker_open)"`).MatchString(html) {
		t.Error("status page does not show beta down")
	}
	for _, bad := range append([]string{"<script", "src=\"http", "href=\"http"}, secrets...) {
		if strings.Contains(html, bad) {
			t.Errorf("status page contains %q", bad)
		}
	}
	// The unprefixed route lists alpha's tools: its tools cell is a count > 0.
	if m := regexp.MustCompile(`data-path="/mcp/alpha">\s*<td>[^<]*<span[^>]*>[^<]*</span></td>\s*<td>alpha</td>\s*<td class="num">0</td>\s*<td class="num">0</td>\s*<td class="num">([1-9][0-9]*)</td>`).FindStringSubmatch(html); m == nil {
		t.Errorf("route /mcp/alpha: no tool count in\n%s", html)
	}

	var ups []gateway.UpstreamStatus
	getJSON(t, admin+"/status/upstreams", &ups)
	if len(ups) != 2 || ups[0].Name != "alpha" || ups[0].State != "ready" || ups[0].ProtocolVersion == "" || ups[1].Name != "beta" || ups[1].State == "ready" || ups[1].LastError == "" {
		t.Errorf("/status/upstreams: %+v", ups)
	}

	var cat gateway.Catalog
	getJSON(t, admin+"/status/catalog?route=/mcp", &cat)
	names := map[string]bool{}
	for _, tool := range cat.Tools {
		var v struct{ Name string }
		_ = json.Unmarshal(tool, &v)
		names[v.Name] = true
	}
	if cat.Route != "/mcp" || !names["alpha__echo"] || len(cat.Prompts) == 0 {
		t.Errorf("/status/catalog: route %q, tools %v, %d prompts", cat.Route, names, len(cat.Prompts))
	}
	if status, body := gatewaytest.HTTPGet(t, admin+"/status/catalog?route=/nope"); status != 404 || !strings.Contains(body, `no route "/nope"; routes: [/mcp /mcp/alpha]`) {
		t.Errorf("unknown route: %d %s", status, body)
	}

	status, body := gatewaytest.HTTPGet(t, admin+"/status/config")
	var cfg map[string]any
	if status != 200 || yaml.Unmarshal([]byte(body), &cfg) != nil || cfg["listen"] == nil || cfg["upstreams"] == nil {
		t.Fatalf("/status/config: %d\n%s", status, body)
	}
	for _, s := range secrets {
		if strings.Contains(body, s) {
			t.Errorf("/status/config shows the secret %q", s)
		}
	}
	if n := strings.Count(body, config.Redacted); n < 3 {
		t.Errorf("/status/config redacts %d values, want the 3 secrets:\n%s", n, body)
	}
	// What it shows is a config validate accepts (secrets aside, which
	// stay [redacted]).
	if _, err := config.Parse("status-config.yaml", []byte(body), nil); err != nil {
		t.Errorf("/status/config does not validate: %v\n%s", err, body)
	}

	if status, body := gatewaytest.HTTPGet(t, admin+"/debug/pprof/"); status != 404 || !strings.Contains(body, "admin.pprof: true") {
		t.Errorf("pprof off: %d %s", status, body)
	}

	// A failed reload is in the history, newest first.
	bad := *gw.Config()
	bad.Listen = "127.0.0.1:1"
	if err := gw.Reload(&bad); err == nil {
		t.Fatal("a reload changing listen succeeded")
	}
	var reloads []gateway.ReloadEvent
	getJSON(t, admin+"/status/reloads", &reloads)
	if len(reloads) != 2 || reloads[0].OK || !strings.Contains(reloads[0].Error, "listen") || !reloads[1].Initial || !reloads[1].OK {
		t.Errorf("/status/reloads: %+v", reloads)
	}
}

func TestPprofOptIn(t *testing.T) {
	_, _, admin := statusGateway(t, true)
	status, body := gatewaytest.HTTPGet(t, admin+"/debug/pprof/")
	if status != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof on: %d %.200s", status, body)
	}
	if status, _ := gatewaytest.HTTPGet(t, admin+"/debug/pprof/goroutine?debug=1"); status != 200 {
		t.Errorf("goroutine profile: %d", status)
	}
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	status, body := gatewaytest.HTTPGet(t, url)
	if status != 200 {
		t.Fatalf("GET %s: %d %s", url, status, body)
	}
	if err := json.Unmarshal([]byte(body), into); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, body)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}
