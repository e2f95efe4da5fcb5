package client

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// Trace context (W3C traceparent/tracestate/baggage) travels from the
// downstream request to the upstream one (internal/telemetry carries it in
// the context): as HTTP headers to HTTP upstreams, and, as MCP's _meta
// convention has it, in params._meta when the caller did not put it there
// itself (the only way to reach a stdio server).

// setTraceHeaders adds ctx's trace context to an upstream HTTP request.
func setTraceHeaders(ctx context.Context, h http.Header) {
	t := telemetry.TraceFrom(ctx)
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
	t := telemetry.TraceFrom(ctx)
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
