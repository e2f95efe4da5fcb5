package host

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/mcpgw/internal/upcall"
)

// Caller is who one request is for (upcall.Caller: the router records
// it, below the host, so that it need not import the host).
type Caller = upcall.Caller

// WithCaller is upcall.WithCaller.
func WithCaller(ctx context.Context, c *Caller) context.Context { return upcall.WithCaller(ctx, c) }

// CallerOf is upcall.CallerOf.
func CallerOf(ctx context.Context) Caller { return upcall.CallerOf(ctx) }

// WithCallerCapabilities records the calling client's capabilities (its
// initialize or per-request clientCapabilities object) for routing calls
// to an upstream with exact_capabilities.
func WithCallerCapabilities(ctx context.Context, caps json.RawMessage) context.Context {
	if len(caps) == 0 {
		return ctx
	}
	return upcall.WithCallerField(ctx, func(c *Caller) { c.Capabilities = caps })
}

// WithSession is upcall.WithSession.
func WithSession(ctx context.Context, key string) context.Context {
	return upcall.WithSession(ctx, key)
}

func sessionFrom(ctx context.Context) string { return upcall.CallerOf(ctx).Session }

// CallerCapabilities are the capabilities recorded in ctx (and CallOnly
// kept).
func CallerCapabilities(ctx context.Context) (json.RawMessage, bool) {
	caps := upcall.CallerOf(ctx).Capabilities
	return caps, len(caps) > 0
}
