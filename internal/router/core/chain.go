package core

import (
	"context"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// The request path is a chain of stages, in the spirit of the go-sdk's
// middleware and CoreDNS's plugin chain: Handle hands each request, as a
// Request, to its route's first stage, and each stage either answers it
// or passes it on to the next (and sees the answer on its way back). The
// order is fixed (routeStages): observe (metrics, span) → contain
// (cancellation, the caller) → local (what the gateway answers itself) →
// decide (policy, pinning: the Verdict) → audit → admit (a target that
// resolves to nothing is refused) → rewrite (the params name the target
// as judged) → enforce (the policy's and the pinning lock's refusals) →
// limit (rate limits, concurrency) → forward (the upstream). The client is
// authenticated before (edge). The chain is composed once per route, with
// only the stages the route's generation configures: a stage that is not
// configured costs nothing.
//
// To add a stage (an interceptor, a curation rule): write it as a Stage in
// a file of its own, with a unit test that drives it with a Request and a
// next func (stages_test.go shows how), and name it in routeStages at its
// place in the order, with when it is on. Nothing else changes.

// Stage is one step of the request path: it answers r, or calls next
// (once) and returns what it returns, or that answer changed. It may fill
// the Request's fields that belong to it (its doc comment says which). It
// keeps nothing of r once it has returned (not r, not a pointer into it:
// Handle reuses the Request for another request).
type Stage func(ctx context.Context, r *Request, next Next) *jsonrpc.Message

// Next is the rest of the chain.
type Next func(ctx context.Context, r *Request) *jsonrpc.Message

// Request is one request on its way down the chain: the message, the
// caller, its route, and what the stages found of it so far.
type Request struct {
	core *Core
	// Sess is the caller's session (a stateless request's lives for the
	// request); Route the route (and generation) serving it.
	Sess  *Session
	Route *Route
	// Msg is the request: local unwraps a search route's call_tool into
	// the call it names, and rewrite makes it name its target as judged.
	Msg *jsonrpc.Message
	// Verdict is the access decision (decide), made once: the transport's
	// when it asked first (Decide), else the chain's own (own).
	Verdict *Verdict
	// Stream takes what the upstream sends during the call (nil: nothing).
	Stream *CallStream

	obs   observed    // observe's metrics and span; stages count refusals on it
	audit *auditEntry // audit's record (nil: audit off)
	own   Verdict     // decide's, when the transport made none
	pm    jsonrpc.Message
}

// Params is the request's params as read once (mcp.ReadParams), once
// decide has run; nil before.
func (r *Request) Params() *mcp.Params { return r.Verdict.Params() }

// stageOn is one stage in the order, and when a route has it (nil:
// always).
type stageOn struct {
	name  string
	stage Stage
	on    func(*Route) bool
}

// routeStages is the request path, in order; forward ends it.
var routeStages = [...]stageOn{
	{"observe", observeStage, nil},
	{"contain", containStage, nil},
	{"local", localStage, nil},
	{"decide", decideStage, nil},
	{"audit", auditStage, func(rte *Route) bool { return rte.Gen.Audit != nil }},
	{"admit", admitStage, nil},
	{"rewrite", rewriteStage, nil},
	{"enforce", enforceStage, func(rte *Route) bool { return rte.Gen.Policy != nil || rte.Gen.Pinner != nil }},
	{"limit", limitStage, func(rte *Route) bool { return rte.Gen.Limiter != nil }},
}

// compose makes stages, in order, into one Next that ends with last.
func compose(stages []Stage, last Next) Next {
	next := last
	for i := len(stages) - 1; i >= 0; i-- {
		stage, rest := stages[i], next
		next = func(ctx context.Context, r *Request) *jsonrpc.Message { return stage(ctx, r, rest) }
	}
	return next
}

// stagesOf are the stages rte has, in order.
func stagesOf(rte *Route) []Stage {
	var out []Stage
	for _, s := range routeStages {
		if s.on == nil || (rte.Gen != nil && s.on(rte)) {
			out = append(out, s.stage)
		}
	}
	return out
}

// serve runs r through its route's chain, composed on first use.
func (rte *Route) serve(ctx context.Context, r *Request) *jsonrpc.Message {
	rte.chain.once.Do(func() { rte.chain.serve = compose(stagesOf(rte), forwardStage) })
	return rte.chain.serve(ctx, r)
}
