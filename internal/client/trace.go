package client

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Trace context (W3C traceparent/tracestate/baggage) travels from the
// downstream request to the upstream one, so one trace spans the client,
// the gateway and the server: as HTTP headers to HTTP upstreams, and, as
// MCP's _meta convention has it, in params._meta when the caller did not put
// it there itself (the only way to reach a stdio server).

// Trace is the trace context of one downstream request.
type Trace struct {
	Parent, State, Baggage string
	// Own marks the gateway's own span (tracing on): it replaces a
	// traceparent the caller put in params._meta, whose child it is.
	Own bool
}

type traceKey struct{}

var traceparentRE = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// TraceFromHeaders reads a request's trace context; an invalid traceparent
// means none (and its companions are dropped with it).
func TraceFromHeaders(h http.Header) Trace {
	t := Trace{Parent: h.Get("Traceparent")}
	if !traceparentRE.MatchString(t.Parent) {
		return Trace{}
	}
	if s := h.Get("Tracestate"); len(s) <= 512 {
		t.State = s
	}
	if b := h.Get("Baggage"); len(b) <= 8192 {
		t.Baggage = b
	}
	return t
}

// WithTrace returns ctx carrying t (ctx itself when t is empty).
func WithTrace(ctx context.Context, t Trace) context.Context {
	if t.Parent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom returns the trace context ctx carries.
func TraceFrom(ctx context.Context) Trace {
	t, _ := ctx.Value(traceKey{}).(Trace)
	return t
}

// setTraceHeaders adds ctx's trace context to an upstream HTTP request.
func setTraceHeaders(ctx context.Context, h http.Header) {
	t := TraceFrom(ctx)
	if t.Parent == "" {
		return
	}
	h.Set("Traceparent", t.Parent)
	if t.State != "" {
		h.Set("Tracestate", t.State)
	}
	if t.Baggage != "" {
		h.Set("Baggage", t.Baggage)
	}
}

// traceMeta adds ctx's trace context to params._meta unless the caller
// already carries a traceparent there.
func traceMeta(ctx context.Context, params json.RawMessage) json.RawMessage {
	t := TraceFrom(ctx)
	if t.Parent == "" {
		return params
	}
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	meta, ok := rawjson.Get(params, "_meta")
	if !ok {
		meta = json.RawMessage(`{}`)
	}
	if _, has := rawjson.Get(meta, "traceparent"); has && !t.Own {
		return params
	}
	m, err := rawjson.SetString(meta, "traceparent", t.Parent)
	if err == nil && t.State != "" {
		m, err = rawjson.SetString(m, "tracestate", t.State)
	}
	if err == nil && t.Baggage != "" {
		m, err = rawjson.SetString(m, "baggage", t.Baggage)
	}
	if err != nil {
		return params
	}
	out, err := rawjson.Set(params, "_meta", m)
	if err != nil {
		return params
	}
	return out
}
