package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// Per-name series are bounded: the first MaxNames names of a kind that
// reached an upstream get their own series; later names, and names only
// ever refused, are "other" (and counted as overflow). Resources are
// labelled by scheme and authority.
func TestTargetSeriesAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true, MaxNames: 2})
	calls := []struct {
		kind    mcp.Kind
		name    string
		outcome metrics.Outcome
	}{
		{mcp.KindTool, "a__made_up", metrics.OutcomeInvalid}, // refused before any upstream: not admitted
		{mcp.KindTool, "a__echo", metrics.OutcomeOK},
		{mcp.KindTool, "a__echo", metrics.OutcomeDenied}, // admitted already: its own series
		{mcp.KindTool, "a__fail", metrics.OutcomeError},
		{mcp.KindTool, "a__third", metrics.OutcomeOK}, // over the bound
		{mcp.KindTool, "a__made_up", metrics.OutcomeDenied},
		{mcp.KindPrompt, "a__greet", metrics.OutcomeOK},
		{mcp.KindResource, "a+file:///etc/hosts", metrics.OutcomeOK},
		{mcp.KindResource, "a+file:///etc/passwd", metrics.OutcomeTimeout},
		{mcp.KindResource, "github://user@repos/x?y", metrics.OutcomeOK},
		{mcp.KindResource, "urn:isbn:123", metrics.OutcomeOK}, // the bound is per kind
	}
	for _, c := range calls {
		m.Target("/mcp", c.kind, c.name, c.outcome, 10*time.Millisecond)
	}
	m.Target("/mcp", "", "x", metrics.OutcomeOK, 0) // no kind: nothing
	var nilM *metrics.Metrics
	nilM.Target("/mcp", mcp.KindTool, "x", metrics.OutcomeOK, 0)
	nilM.RequestDone("/mcp", "tools/call", metrics.OutcomeOK, 0)

	want := `
# HELP mcpgw_metric_names_overflow_total Requests counted under the name "other" in the per-name metrics because admin.max_metric_names names of their kind (tool, prompt, resource) already have series.
# TYPE mcpgw_metric_names_overflow_total counter
mcpgw_metric_names_overflow_total{kind="prompt"} 0
mcpgw_metric_names_overflow_total{kind="resource"} 1
mcpgw_metric_names_overflow_total{kind="tool"} 3
# HELP mcpgw_prompt_gets_total Downstream prompts/get requests answered, by route, prompt and outcome (as mcpgw_requests_total); at most admin.max_metric_names prompt names, the rest as "other".
# TYPE mcpgw_prompt_gets_total counter
mcpgw_prompt_gets_total{outcome="ok",prompt="a__greet",route="/mcp"} 1
# HELP mcpgw_resource_reads_total Downstream resources/read requests answered, by route, resource and outcome (as mcpgw_requests_total); at most admin.max_metric_names resource names, the rest as "other".
# TYPE mcpgw_resource_reads_total counter
mcpgw_resource_reads_total{outcome="ok",resource="a+file://",route="/mcp"} 1
mcpgw_resource_reads_total{outcome="ok",resource="github://repos",route="/mcp"} 1
mcpgw_resource_reads_total{outcome="ok",resource="other",route="/mcp"} 1
mcpgw_resource_reads_total{outcome="timeout",resource="a+file://",route="/mcp"} 1
# HELP mcpgw_tool_calls_total Downstream tools/call requests answered, by route, tool and outcome (as mcpgw_requests_total); at most admin.max_metric_names tool names, the rest as "other".
# TYPE mcpgw_tool_calls_total counter
mcpgw_tool_calls_total{outcome="denied",route="/mcp",tool="a__echo"} 1
mcpgw_tool_calls_total{outcome="denied",route="/mcp",tool="other"} 1
mcpgw_tool_calls_total{outcome="error",route="/mcp",tool="a__fail"} 1
mcpgw_tool_calls_total{outcome="invalid",route="/mcp",tool="other"} 1
mcpgw_tool_calls_total{outcome="ok",route="/mcp",tool="a__echo"} 1
mcpgw_tool_calls_total{outcome="ok",route="/mcp",tool="other"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpgw_tool_calls_total", "mcpgw_prompt_gets_total", "mcpgw_resource_reads_total", "mcpgw_metric_names_overflow_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "mcpgw_tool_call_duration_seconds"); n != 3 { // a__echo, a__fail, other
		t.Errorf("tool duration series: %d, want 3", n)
	}
}

// Downstream latency: one histogram per route and method, the method
// bounded like mcpgw_requests_total's.
func TestRequestDuration(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})
	m.RequestDone("/mcp", "tools/call", metrics.OutcomeOK, 30*time.Millisecond)
	m.RequestDone("/mcp", "tools/call", metrics.OutcomeRateLimited, 2*time.Millisecond)
	m.RequestDone("/mcp", "made/up", metrics.OutcomeInvalid, time.Millisecond)
	want := `
# HELP mcpgw_requests_total Downstream MCP requests answered, by route, method and outcome (ok, error, invalid, unavailable, timeout, denied, rate_limited).
# TYPE mcpgw_requests_total counter
mcpgw_requests_total{method="other",outcome="invalid",route="/mcp"} 1
mcpgw_requests_total{method="tools/call",outcome="ok",route="/mcp"} 1
mcpgw_requests_total{method="tools/call",outcome="rate_limited",route="/mcp"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpgw_requests_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "mcpgw_request_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			var method string
			for _, l := range s.GetLabel() {
				if l.GetName() == "method" {
					method = l.GetValue()
				}
			}
			counts[method] = s.GetHistogram().GetSampleCount()
		}
	}
	if counts["tools/call"] != 2 || counts["other"] != 1 || len(counts) != 2 {
		t.Errorf("request_duration sample counts by method: %v", counts)
	}
}
