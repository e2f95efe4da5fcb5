package upcall

import (
	"context"
	"encoding/json"
)

// Caller is who one request is for, as the router knows the downstream
// side: everything the host and the catalog read about it, in one context
// value. One value rather than one per field, because the router puts it
// on every request it dispatches: a context.WithValue per field cost two
// allocations each on the hot path (issue 18).
type Caller struct {
	// Session is the downstream session id ("" for a 2026-07-28
	// request): stateful upstreams use that session's own connection
	// (host/stateful.go).
	Session string
	// Capabilities are the calling client's (its initialize or
	// per-request clientCapabilities object), for exact_capabilities
	// (host/capviews.go); nil: none recorded.
	Capabilities json.RawMessage
	// Route and Principal (auth.Principal.Key, "" when auth is off) own
	// the tasks the request creates and uses (catalog/tasks.go).
	Route, Principal string
}

type callerKey struct{}

// WithCaller records c as the caller of the requests made with the
// returned context. c is read, never written, from then on: the router
// keeps one per session and hands out a pointer to it without a copy.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf is the caller recorded in ctx (the zero Caller when none is).
func CallerOf(ctx context.Context) Caller {
	if c, _ := ctx.Value(callerKey{}).(*Caller); c != nil {
		return *c
	}
	return Caller{}
}

// WithCallerField returns ctx with a copy of its caller changed by set
// (the one recorded is never written).
func WithCallerField(ctx context.Context, set func(*Caller)) context.Context {
	c := CallerOf(ctx)
	set(&c)
	return WithCaller(ctx, &c)
}

// WithSession marks ctx as belonging to the downstream session key, so
// that stateful upstreams use that session's own connection.
func WithSession(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return WithCallerField(ctx, func(c *Caller) { c.Session = key })
}
