package gatewaytest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap/zaptest"
)

// StartAdminGateway starts a gateway from YAML (which should set
// admin.listen: 127.0.0.1:0) and returns it with its MCP and admin base URLs.
func StartAdminGateway(t *testing.T, yaml string, opts gateway.Options) (*gateway.Gateway, string, string) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = zaptest.NewLogger(t)
	opts.Listener = ln
	opts.Version = "test"
	gw := RunGateway(t, cfg, opts)
	if gw.AdminAddr() == nil {
		t.Fatal("no admin listener")
	}
	return gw, "http://" + ln.Addr().String(), "http://" + gw.AdminAddr().String()
}

func HTTPGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape fetches /metrics and parses the exposition.
func Scrape(t *testing.T, admin string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	status, body := HTTPGet(t, admin+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d: %s", status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs, body
}

// Sample returns the value of the series of name whose labels include the
// given pairs; ok is false when there is none.
func Sample(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	base, suffix := name, ""
	for _, s := range []string{"_count", "_sum"} {
		if b, ok := strings.CutSuffix(name, s); ok && mfs[name] == nil {
			base, suffix = b, s
		}
	}
	mf := mfs[base]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case suffix == "_count":
			return float64(m.GetHistogram().GetSampleCount()), true
		case suffix == "_sum":
			return m.GetHistogram().GetSampleSum(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// PromtoolCheck runs `promtool check metrics` on an exposition when promtool
// is installed (.ci/run installs it).
func PromtoolCheck(t *testing.T, exposition string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("MCPGW_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool is not installed (MCPGW_REQUIRE_PROMTOOL is set; .ci/run installs it)")
		}
		t.Log("promtool not installed; skipping promtool check metrics")
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}

func Readiness(t *testing.T, admin string) (int, gateway.Readiness) {
	t.Helper()
	status, body := HTTPGet(t, admin+"/readyz")
	var r gateway.Readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	return status, r
}

// AuditRecords reads the audit file: one JSON object per line.
func AuditRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("audit line is not JSON: %v: %s", err, line)
		}
		out = append(out, m)
	}
	return out
}

// SDKUpstream serves a test server over Streamable HTTP and returns its URL
// and the server, whose Sessions show how many connections it has.
func SDKUpstream(t *testing.T, name string) (string, *mcp.Server) {
	t.Helper()
	srv := SDKServer(name, 100)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", srv
}

func ServerSessions(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

func ParseConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("reload.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// StartReloadable starts a gateway with metrics on a registry of the test's.
func StartReloadable(t *testing.T, yaml string) (*gateway.Gateway, string, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := RunGateway(t, ParseConfig(t, yaml), gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln, Metrics: metrics.New(reg, metrics.Options{})})
	return gw, "http://" + ln.Addr().String(), reg
}

func Reloads(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcpgw_config_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if LabelIs(m, "result", result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func LabelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
