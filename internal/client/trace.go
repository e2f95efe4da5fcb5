package client

import (
	"context"
	"encoding/json"
	"net/http"

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

// validTraceparent reports whether s has the traceparent form
// version-traceid-parentid-flags: 2, 32, 16 and 2 lowercase hex digits
// joined by dashes. By hand rather than by regexp: 0.12 against 0.38 µs
// per traced request (trace_test.go keeps the regexp as the oracle).
func validTraceparent(s string) bool {
	if len(s) != 55 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 2, 35, 52:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// TraceFromHeaders reads a request's trace context; an invalid traceparent
// means none (and its companions are dropped with it).
func TraceFromHeaders(h http.Header) Trace {
	t := Trace{Parent: h.Get("Traceparent")}
	if !validTraceparent(t.Parent) {
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
