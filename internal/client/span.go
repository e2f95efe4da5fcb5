package client

import (
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// Tracing an upstream call: when the caller's context carries a span (the
// router's server span of a traced request), Call makes a client span, its
// child, named and attributed like it (internal/telemetry) with the
// upstream's own name for the target, and sends the upstream this span as
// its parent (traceparent header and params._meta, trace.go). Without a
// span in the context nothing here runs. The tracer comes from the parent
// span's provider: the provider is injected once, at the gateway, and
// never looked up globally.

func (c *Client) tracedCall(ctx context.Context, method string, params json.RawMessage, opts CallOptions) (*jsonrpc.Message, error) {
	ctx, span := c.startSpan(ctx, method, params)
	resp, err := c.call(ctx, method, params, opts)
	if err != nil {
		telemetry.EndError(span, errorType(err), err)
		return resp, err
	}
	telemetry.EndResponse(span, method, resp)
	return resp, nil
}

func (c *Client) startSpan(ctx context.Context, method string, params json.RawMessage) (context.Context, trace.Span) {
	kind, name := telemetry.Target(method, params)
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = telemetry.TargetAttributes(method, kind, name, attrs)
	attrs = append(attrs, telemetry.KeyUpstream.String(c.opts.Name), telemetry.KeyTransport.String(c.networkTransport()))
	if v := c.ProtocolVersion(); v != "" {
		attrs = append(attrs, telemetry.KeyProtocolVersion.String(v))
	}
	tr := trace.SpanFromContext(ctx).TracerProvider().Tracer(telemetry.ScopeName)
	ctx, span := tr.Start(ctx, telemetry.SpanName(method, kind, name), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	sc := span.SpanContext()
	ctx = telemetry.WithTrace(ctx, telemetry.Trace{Parent: telemetry.Traceparent(sc), State: sc.TraceState().String(), Baggage: telemetry.TraceFrom(ctx).Baggage, Own: true})
	return ctx, span
}

// networkTransport is network.transport: pipe for a stdio child, tcp for
// HTTP.
func (c *Client) networkTransport() string {
	if _, ok := c.t.(Child); ok {
		return "pipe"
	}
	return "tcp"
}

// errorType is error.type of a call that got no response.
func errorType(err error) string {
	var te *TimeoutError
	switch {
	case errors.As(err, &te):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, ErrClosed):
		return "unavailable"
	}
	return "transport"
}

// upstreamRequestEvent records on the call's span that the upstream sent a
// server→client request during it (sampling, elicitation, roots: what the
// gateway relays or bridges).
func upstreamRequestEvent(ctx context.Context, method string) {
	if ctx == nil {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(telemetry.EventUpstreamRequest, trace.WithAttributes(telemetry.KeyMethod.String(method)))
	}
}
