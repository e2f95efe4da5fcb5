// Package upcall is what a call to an upstream carries beside its
// message, named where both sides can see it: the per-call options and
// handler of the messages the upstream sends during the call (CallOptions,
// CallHandler), the Mcp-Param-* headers mirrored to a 2026-07-28 HTTP
// upstream (WithHeaders), and who the call is for (Caller).
//
// The router makes these and the client and host read them; keeping them
// here, below all three, is what lets the router's packages name them
// without importing client or host (docs/architecture.md, Import rules).
// client and host keep aliases of the names they had.
package upcall

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// CallOptions are per-call settings: where the messages an upstream sends
// about this call go.
type CallOptions struct {
	// Progress, when set and the params carry _meta.progressToken, receives
	// every progress notification for this call with the caller's token restored.
	Progress func(params json.RawMessage)
	// Notify receives other notifications sent during this call (log messages).
	Notify func(method string, params json.RawMessage)
	// Request answers server→client requests sent during this call
	// (sampling, elicitation, roots); nil leaves them to Options.OnRequest.
	Request func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
	// LogLevel is the caller's logging threshold, passed in _meta to a
	// stateless upstream for callers that do not speak its revision (a
	// 2026-07-28 caller's own _meta already carries it).
	LogLevel string
	// Capabilities, for a caller that does not speak a stateless upstream's
	// revision, are the client capabilities declared for it in the request's
	// _meta (nil: the gateway's own). A 2026-07-28 caller's _meta carries its own.
	Capabilities json.RawMessage
	// PassInputRequired hands a 2026-07-28 upstream's input_required result
	// to the caller as it is (the caller speaks 2026-07-28 too); otherwise
	// the gateway answers the input requests through Request and retries.
	PassInputRequired bool
	// Background marks a long-lived call (subscriptions/listen) that never
	// owns messages by elimination and has no timeout.
	Background bool
	// Parked, when set, reports whether the call is blocked in one of its
	// server→client requests until its client comes back (a bridged call
	// awaiting a 2026-07-28 client's retry): see the client's owner.
	Parked func() bool
	// Handler, when set, takes what Progress, Notify and Request leave
	// nil: one interface value where three method values would cost an
	// allocation each on every call (the router's call streams).
	Handler CallHandler
	// Roots, when set, answers roots/list during the call (the roots from
	// config) instead of Request.
	Roots func() json.RawMessage
	// View is what the gateway's edge read of the params
	// (mcp.Params.ForwardView; their target may have been renamed since,
	// which leaves _meta as it was): the client edits _meta by it — hop
	// keys, progress token — in one edit, rather than reading the params
	// again. View.Read false: it reads them.
	View mcp.ForwardView
	// Target is the routed target as the params sent upstream name it
	// (mcp.NameHeaderField's member), for the Mcp-Name header a 2026-07-28
	// upstream is sent; "": the client reads it from the params.
	Target string
}

// CallHandler receives what an upstream sends during one call, as
// CallOptions' Progress, Notify and Request do.
type CallHandler interface {
	Progress(params json.RawMessage)
	Notify(method string, params json.RawMessage)
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
}

// Expand moves Handler's methods into the func fields it fills, for code
// that wraps them; Handler is then nil.
func (o *CallOptions) Expand() {
	if h := o.Handler; h != nil {
		if o.Progress == nil {
			o.Progress = h.Progress
		}
		if o.Notify == nil {
			o.Notify = h.Notify
		}
		if o.Request == nil {
			o.Request = h.Request
		}
		o.Handler = nil
	}
}

// ProgressFunc is what receives the call's progress notifications
// (Progress, else Handler's), nil when nothing does.
func (o *CallOptions) ProgressFunc() func(json.RawMessage) {
	if o.Progress == nil && o.Handler != nil {
		return o.Handler.Progress
	}
	return o.Progress
}

// NotifyFunc is what receives the call's other notifications (Notify,
// else Handler's), nil when nothing does.
func (o *CallOptions) NotifyFunc() func(string, json.RawMessage) {
	if o.Notify == nil && o.Handler != nil {
		return o.Handler.Notify
	}
	return o.Notify
}

// CanAsk reports whether the call relays server→client requests (Ask).
func (o CallOptions) CanAsk() bool { return o.Request != nil || o.Handler != nil }

// Ask answers a server→client request made during the call: roots/list
// from Roots when set, anything else through Request (or Handler). Only
// when CanAsk.
func (o CallOptions) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	switch {
	case method == mcp.MethodRootsList && o.Roots != nil:
		return o.Roots(), nil
	case o.Request != nil:
		return o.Request(ctx, method, params)
	}
	return o.Handler.Request(ctx, method, params)
}

// Interactive reports whether the call can take messages beyond progress.
func (o CallOptions) Interactive() bool {
	return !o.Background && (o.Notify != nil || o.CanAsk() || o.Handler != nil)
}

type headersKey struct{}

// WithHeaders returns a context whose requests to a 2026-07-28 HTTP upstream
// carry h: the Mcp-Param-* headers mirrored from a tool call's arguments.
// Nothing else travels this way — the downstream's credentials never reach
// an upstream.
//
// A non-nil h replaces what an outer WithHeaders set, even when empty: the
// host sets exactly the headers a tool's x-mcp-header annotations call for.
func WithHeaders(ctx context.Context, h http.Header) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, headersKey{}, h)
}

// HeadersFrom are the headers WithHeaders recorded in ctx (nil, false
// when none were).
func HeadersFrom(ctx context.Context) (http.Header, bool) {
	h, ok := ctx.Value(headersKey{}).(http.Header)
	return h, ok
}
