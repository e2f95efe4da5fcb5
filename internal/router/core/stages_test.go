package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// Each stage of the request path (chain.go) alone: a Request, and a next
// that records whether the stage passed it on. No upstream, no network.

// stageCore is a core with no host: enough for the stages that ask none.
func stageCore(t *testing.T) *Core {
	t.Helper()
	c := New(nil, Options{Logger: zap.NewNop(), Current: func() *Generation { return nil }, Sessions: noStored{}})
	t.Cleanup(func() { c.Close(func() {}) })
	return c
}

// stageRequest is a request of a session on a route of gen.
func stageRequest(c *Core, gen *Generation, method, params string) *Request {
	rte := &Route{Path: "/mcp", Gen: gen}
	sess := NewSession("s", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
	return &Request{core: c, Sess: sess, Route: rte, Msg: jsonrpc.NewRequest(jsonrpc.IntID(1), method, json.RawMessage(params))}
}

// passed is a next that answers ok and records that it ran.
func passed(ran *bool) Next {
	return func(context.Context, *Request) *jsonrpc.Message {
		*ran = true
		return jsonrpc.NewResult(jsonrpc.IntID(1), json.RawMessage(`{"ok":true}`))
	}
}

func TestStagesOfARoute(t *testing.T) {
	names := func(gen *Generation) string {
		var out []string
		for _, s := range routeStages {
			if s.on == nil || s.on(&Route{Gen: gen}) {
				out = append(out, s.name)
			}
		}
		return strings.Join(out, " ")
	}
	if got, want := names(&Generation{}), "observe contain local decide admit rewrite"; got != want {
		t.Errorf("unconfigured: %s, want %s", got, want)
	}
	full := &Generation{Audit: audit.New(zap.NewNop(), audit.Options{}), Policy: allowAll, Limiter: policy.NewLimiter(&config.RateLimits{})}
	if got, want := names(full), "observe contain local decide audit admit rewrite enforce limit"; got != want {
		t.Errorf("configured: %s, want %s", got, want)
	}
	if n := len(stagesOf(&Route{Gen: &Generation{}})); n != 6 {
		t.Errorf("stagesOf: %d stages, want 6", n)
	}
}

// compose runs the stages in order, each around the rest.
func TestComposeOrder(t *testing.T) {
	var trace []string
	stage := func(name string) Stage {
		return func(ctx context.Context, r *Request, next Next) *jsonrpc.Message {
			trace = append(trace, name+">")
			resp := next(ctx, r)
			trace = append(trace, "<"+name)
			return resp
		}
	}
	var ran bool
	compose([]Stage{stage("a"), stage("b")}, passed(&ran))(context.Background(), &Request{})
	if got := strings.Join(trace, " "); !ran || got != "a> b> <b <a" {
		t.Errorf("ran %v, trace %q", ran, got)
	}
}

func TestLocalStage(t *testing.T) {
	c, rte, _ := benchCore(t) // a route's view, over an upstream in memory
	for _, tc := range []struct {
		method, params string
		passes         bool
		code           int // of the local answer's error (0: a result)
	}{
		{mcp.MethodPing, `{}`, false, 0},
		{"nope/nothing", `{}`, false, jsonrpc.CodeMethodNotFound},
		{mcp.MethodLoggingSetLevel, `{"level":"loud"}`, false, jsonrpc.CodeInvalidParams},
		{mcp.MethodToolsCall, `{"name":"up__echo"}`, true, 0},
		{mcp.MethodResourcesRead, `{"uri":"file:///a"}`, true, 0},
	} {
		var ran bool
		r := stageRequest(c, &Generation{}, tc.method, tc.params)
		r.Route = rte
		resp := localStage(context.Background(), r, passed(&ran))
		if ran != tc.passes {
			t.Errorf("%s: passed on %v, want %v", tc.method, ran, tc.passes)
			continue
		}
		if !tc.passes && ((tc.code == 0) != (resp.Error == nil) || (resp.Error != nil && resp.Error.Code != tc.code)) {
			t.Errorf("%s: answered %s %v, want code %d", tc.method, resp.Result, resp.Error, tc.code)
		}
	}
}

// contain puts the caller in ctx, and answers a skills/get not found as
// invalid params.
func TestContainStage(t *testing.T) {
	c := stageCore(t)
	r := stageRequest(c, &Generation{}, mcp.MethodSkillsGet, `{"uri":"skill://x/SKILL.md"}`)
	resp := containStage(context.Background(), r, func(ctx context.Context, _ *Request) *jsonrpc.Message {
		if _, ok := host.CallerCapabilities(ctx); !ok {
			t.Error("no caller in the context below contain")
		}
		return jsonrpc.NewError(jsonrpc.IntID(1), &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "no such skill"})
	})
	if resp.Error == nil || resp.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("skills/get not found answered %v, want -32602", resp.Error)
	}
}

// decide keeps the transport's verdict when it was made for this route.
func TestDecideStageKeepsTheTransportsVerdict(t *testing.T) {
	c := stageCore(t)
	r := stageRequest(c, &Generation{}, mcp.MethodToolsCall, `{"name":"x"}`)
	v := &Verdict{rte: r.Route}
	r.Verdict = v
	var ran bool
	decideStage(context.Background(), r, passed(&ran))
	if !ran || r.Verdict != v {
		t.Errorf("ran %v, verdict replaced %v", ran, r.Verdict != v)
	}
}

func TestAdmitStage(t *testing.T) {
	c := stageCore(t)
	r := stageRequest(c, &Generation{}, mcp.MethodToolsCall, `{"name":"x"}`)
	r.Verdict = &Verdict{rte: r.Route, pinErr: jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown tool x")}
	var ran bool
	if resp := admitStage(context.Background(), r, passed(&ran)); ran || resp.Error == nil || !strings.Contains(resp.Error.Message, "unknown tool x") {
		t.Errorf("a target resolved to nothing: passed %v, answered %v", ran, resp.Error)
	}
	r.Verdict = &Verdict{rte: r.Route}
	if admitStage(context.Background(), r, passed(&ran)); !ran {
		t.Error("a request with nothing to refuse was not passed on")
	}
}

// rewrite makes the request name its target as judged, leaving the
// caller's message as it was.
func TestRewriteStage(t *testing.T) {
	c := stageCore(t)
	r := stageRequest(c, &Generation{}, mcp.MethodToolsCall, `{"name":"echo"}`)
	orig := r.Msg
	r.Verdict = &Verdict{rte: r.Route, params: json.RawMessage(`{"name":"up__echo"}`)}
	rewriteStage(context.Background(), r, func(_ context.Context, r *Request) *jsonrpc.Message {
		if string(r.Msg.Params) != `{"name":"up__echo"}` {
			t.Errorf("forwarded %s", r.Msg.Params)
		}
		return nil
	})
	if string(orig.Params) != `{"name":"echo"}` {
		t.Errorf("the caller's message changed: %s", orig.Params)
	}
}

func TestEnforceStage(t *testing.T) {
	c := stageCore(t)
	gen := &Generation{Policy: allowAll}
	r := stageRequest(c, gen, mcp.MethodToolsCall, `{"name":"x"}`)
	r.Verdict = &Verdict{rte: r.Route, targeted: true, kind: policy.KindTool, name: "x", decided: true,
		decision: policy.Decision{MissingScopes: []string{"tools:x"}}}
	var ran bool
	if resp := enforceStage(context.Background(), r, passed(&ran)); ran || resp.Error == nil || !strings.Contains(resp.Error.Message, "needs scope") {
		t.Errorf("a denied call: passed %v, answered %v", ran, resp.Error)
	}
	r.Verdict.decision = policy.Decision{Allowed: true}
	if enforceStage(context.Background(), r, passed(&ran)); !ran {
		t.Error("an allowed call was not passed on")
	}
	r.Verdict = &Verdict{rte: r.Route, task: true} // a task is its principal's own: nothing to judge
	ran = false
	if enforceStage(context.Background(), r, passed(&ran)); !ran {
		t.Error("a tasks request was not passed on")
	}
}

// limit refuses once the caller's bucket is empty, and holds nothing then.
func TestLimitStage(t *testing.T) {
	c, base, _ := benchCore(t) // a route's view, over an upstream in memory
	lim := policy.NewLimiter(&config.RateLimits{Principal: &config.RateLimit{Rate: config.Rate{N: 1, Per: time.Hour}, Burst: 1}})
	gen := &Generation{Limiter: lim}
	call := func() (bool, *jsonrpc.Message) {
		r := stageRequest(c, gen, mcp.MethodToolsCall, `{"name":"up__echo"}`)
		r.Route.View = base.View
		r.Verdict = &Verdict{rte: r.Route, targeted: true, kind: policy.KindTool, name: "up__echo"}
		var ran bool
		resp := limitStage(context.Background(), r, passed(&ran))
		return ran, resp
	}
	if ran, _ := call(); !ran {
		t.Fatal("the first call was not passed on")
	}
	if ran, resp := call(); ran || resp.Error == nil || resp.Error.Code != mcp.CodeRateLimited {
		t.Errorf("the second call: passed %v, answered %v", ran, resp.Error)
	}
}

// audit writes one record per audited request, with its outcome.
func TestAuditStage(t *testing.T) {
	c := stageCore(t)
	core, logs := observer.New(zap.InfoLevel)
	gen := &Generation{Audit: audit.New(zap.New(core), audit.Options{})}
	r := stageRequest(c, gen, mcp.MethodToolsCall, `{"name":"x","arguments":{"a":1}}`)
	r.Verdict = &Verdict{rte: r.Route}
	var ran bool
	auditStage(context.Background(), r, passed(&ran))
	if !ran || logs.Len() != 1 {
		t.Fatalf("passed %v, %d records", ran, logs.Len())
	}
}

// observe counts the request with the outcome its answer has, a refusal a
// later stage counted (obs.refuse) as what it is.
func TestObserveStage(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})
	c := New(nil, Options{Logger: zap.NewNop(), Metrics: m, Current: func() *Generation { return nil }, Sessions: noStored{}})
	t.Cleanup(func() { c.Close(func() {}) })
	r := stageRequest(c, &Generation{}, mcp.MethodToolsCall, `{"name":"x"}`)
	resp := observeStage(context.Background(), r, func(_ context.Context, r *Request) *jsonrpc.Message {
		gerr := &jsonrpc.Error{Code: mcp.CodeRateLimited, Message: "slow down"}
		r.obs.refuse(gerr)
		return jsonrpc.NewError(r.Msg.ID, gerr)
	})
	if resp.Error == nil || resp.Error.Code != mcp.CodeRateLimited {
		t.Fatalf("answer %v", resp.Error)
	}
	want := `
# HELP mcpgw_requests_total Downstream MCP requests answered, by route, method and outcome (ok, error, invalid, unavailable, timeout, denied, rate_limited).
# TYPE mcpgw_requests_total counter
mcpgw_requests_total{method="tools/call",outcome="rate_limited",route="/mcp"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "mcpgw_requests_total"); err != nil {
		t.Error(err)
	}
}

// forward sends the request to the upstream its resolved target names and
// puts the downstream id back on the answer.
func TestForwardStage(t *testing.T) {
	c, rte, _ := benchCore(t) // an upstream in memory
	sess := NewSession("s", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
	msg := jsonrpc.NewRequest(jsonrpc.IntID(42), mcp.MethodToolsCall, json.RawMessage(`{"name":"up__echo","arguments":{"text":"hi"}}`))
	r := &Request{core: c, Sess: sess, Route: rte, Msg: msg, Verdict: c.Decide(context.Background(), rte, msg)}
	resp := forwardStage(context.Background(), r)
	if resp.Error != nil || string(resp.Result) != `{"content":[{"type":"text","text":"echo:hi"}]}` || resp.ID.String() != "42" {
		t.Errorf("answer %s %s %v", resp.ID, resp.Result, resp.Error)
	}
}
