package core

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// What Handle reports about each request: its outcome, latency and (for
// tools, prompts and resources) its target in the metrics, and, with
// tracing on (Options.Tracer), a server span. With tracing off none of the
// span code runs: no attribute is built and nothing is put in the context.
//
// The server span's parent is the trace context the caller sent in
// params._meta (the MCP convention), else its HTTP traceparent (which is
// then linked when both are there and differ). Upstream calls made for the
// request are its children (the client package makes their spans from the
// one in the context), and the upstreams receive those as their parent.

// observed is what Handle keeps about a request for report.
type observed struct {
	start   time.Time
	span    trace.Span // nil: tracing off
	refused metrics.Outcome
	kind    mcp.Kind
	name    string
	named   bool // kind and name were read
}

// notRefused marks a request the guard let through.
const notRefused metrics.Outcome = -1

// observe starts observing one request: the clock, and the server span.
func (c *Core) observe(ctx context.Context, sess *Session, rte *Route, msg *jsonrpc.Message, cs *CallStream) (context.Context, observed) {
	o := observed{start: time.Now(), refused: notRefused}
	tr := c.opts.Tracer
	if tr == nil {
		return ctx, o
	}
	o.kind, o.name = telemetry.Target(msg.Method, msg.Params)
	o.named = true
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = telemetry.TargetAttributes(msg.Method, o.kind, o.name, attrs)
	attrs = append(attrs,
		telemetry.KeyRoute.String(rte.Path),
		telemetry.KeyProtocolVersion.String(string(sess.version)),
		telemetry.KeyRequestID.String(telemetry.RequestID(msg.ID)))
	if sess.id != "" {
		attrs = append(attrs, telemetry.KeySessionID.String(telemetry.SessionID(sess.id)))
	}
	if p := auth.FromContext(ctx); p != nil && p.Subject != "" {
		attrs = append(attrs, telemetry.KeyUserID.String(p.Subject))
	}
	if o.name != "" {
		if up, _, ok := rte.View.Resolve(o.kind == mcp.KindResource, o.name); ok {
			attrs = append(attrs, telemetry.KeyUpstream.String(up))
		}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
	parent, ok := metaParent(msg.Params)
	hdr := telemetry.TraceFrom(ctx)
	if h, hok := telemetry.RemoteContext(hdr.Parent, hdr.State); hok {
		if !ok {
			parent, ok = h, true
		} else if h.SpanID() != parent.SpanID() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: h}))
		}
	}
	if ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, o.span = tr.Start(ctx, telemetry.SpanName(msg.Method, o.kind, o.name), opts...)
	if cs != nil && cs.park != nil {
		cs.park.setSpan(o.span)
	}
	return ctx, o
}

// metaParent reads the caller's trace context from params._meta.
func metaParent(params []byte) (trace.SpanContext, bool) {
	meta, ok := rawjson.Get(params, "_meta")
	if !ok {
		return trace.SpanContext{}, false
	}
	tp, _ := rawjson.GetString(meta, "traceparent")
	if tp == "" {
		return trace.SpanContext{}, false
	}
	ts, _ := rawjson.GetString(meta, "tracestate")
	return telemetry.RemoteContext(tp, ts)
}

// refuse records that the guard refused the request: a rate limit, or the
// access policy or pinning (denied), whatever error code the client sees.
func (o *observed) refuse(gerr *jsonrpc.Error) {
	o.refused = metrics.OutcomeDenied
	if gerr.Code == mcp.CodeRateLimited {
		o.refused = metrics.OutcomeRateLimited
	}
}

// report counts the request and ends its span.
func (c *Core) report(rte *Route, msg *jsonrpc.Message, resp *jsonrpc.Message, o *observed) {
	outcome := o.refused
	if outcome == notRefused {
		var e *jsonrpc.Error
		if resp != nil {
			e = resp.Error
		}
		outcome = metrics.OutcomeOf(e)
	}
	m := c.opts.Metrics
	elapsed := time.Since(o.start)
	m.RequestDone(rte.Path, msg.Method, outcome, elapsed)
	if m != nil && metrics.PerName(msg.Method) {
		if !o.named {
			o.kind, o.name = telemetry.Target(msg.Method, msg.Params)
		}
		m.Target(rte.Path, o.kind, o.name, outcome, elapsed)
	}
	if o.span != nil {
		o.span.SetAttributes(telemetry.KeyOutcome.String(outcome.String()))
		telemetry.EndResponse(o.span, msg.Method, resp)
	}
}

// traceID is the trace of the request ctx belongs to ("" when none is
// recorded), for its audit record.
func traceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// setSpan gives a parked call the server span of its request, which its
// bridged rounds are events of.
func (p *parkedCall) setSpan(s trace.Span) {
	p.mu.Lock()
	p.span = s
	p.mu.Unlock()
}

// event adds a bridged round to the call's span (nothing with tracing off).
func (p *parkedCall) event(name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	s, round := p.span, p.round
	p.mu.Unlock()
	if s != nil {
		s.AddEvent(name, trace.WithAttributes(attribute.Int("mcpgw.bridge.round", round)))
	}
}
