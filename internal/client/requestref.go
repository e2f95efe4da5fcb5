package client

import "context"

// RequestRef is what the upstream side knows of the downstream request it
// works for: its id (X-Request-Id, the request_id of the gateway's log
// lines). The edge puts it in the request's context; an error composed
// from a transport failure names it, so that the caller can quote it and
// the operator find the detail, which stays in the log.
type RequestRef interface{ RequestID() string }

type requestRefKey struct{}

// WithRequestRef returns ctx carrying r.
func WithRequestRef(ctx context.Context, r RequestRef) context.Context {
	return context.WithValue(ctx, requestRefKey{}, r)
}

// RequestRefFrom returns the RequestRef ctx carries, or nil.
func RequestRefFrom(ctx context.Context) RequestRef {
	r, _ := ctx.Value(requestRefKey{}).(RequestRef)
	return r
}
