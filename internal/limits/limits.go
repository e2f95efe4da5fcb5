// Package limits is how every configured bound of mcpgw refuses when it is
// full (DESIGN.md invariant 7): one error type, Refusal, that names the
// bound's config key, and its two forms — an HTTP answer (503 for a bound
// of the whole gateway, 429 for a per-principal share, both with
// Retry-After and a JSON-RPC error body) and a JSON-RPC error for answers
// that travel inside a transport (an SSE stream, stdio, a result).
package limits

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// DefaultRetryAfter is the Retry-After of a refusal that does not say.
const DefaultRetryAfter = 5

// Refusal is a request refused because a configured bound is full.
type Refusal struct {
	// Bound is the config key of the bound, e.g. sessions.max_sessions.
	Bound string
	// Max is the bound's value.
	Max int
	// What is what there are too many of, e.g. "sessions for this
	// principal".
	What string
	// PerPrincipal marks a per-principal share (HTTP 429) rather than a
	// bound of the whole gateway (HTTP 503).
	PerPrincipal bool
	// RetryAfter is the suggested wait in seconds (0: DefaultRetryAfter).
	RetryAfter int
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("mcpgw: too many %s (%d, %s); retry in %ds, or raise %s", r.What, r.Max, r.Bound, r.retryAfter(), r.Bound)
}

func (r *Refusal) retryAfter() int {
	if r.RetryAfter > 0 {
		return r.RetryAfter
	}
	return DefaultRetryAfter
}

// Status is the HTTP status of the refusal.
func (r *Refusal) Status() int {
	if r.PerPrincipal {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// JSONRPC is the refusal as a JSON-RPC error; data carries the bound, its
// value and retryAfterSeconds.
func (r *Refusal) JSONRPC() *jsonrpc.Error {
	data, _ := json.Marshal(struct {
		Bound      string `json:"bound"`
		Max        int    `json:"max"`
		RetryAfter int    `json:"retryAfterSeconds"`
	}{r.Bound, r.Max, r.retryAfter()})
	return &jsonrpc.Error{Code: mcp.CodeRateLimited, Message: r.Error(), Data: data}
}

// Write answers an HTTP request with the refusal: its status, Retry-After
// and the JSON-RPC error (with id, when the request's id is known).
func (r *Refusal) Write(w http.ResponseWriter, id jsonrpc.ID) {
	b, err := jsonrpc.Encode(jsonrpc.NewError(id, r.JSONRPC()))
	if err != nil {
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32004,"message":"mcpgw: a configured bound is full"}}`)
	}
	w.Header().Set("Retry-After", strconv.Itoa(r.retryAfter()))
	w.Header().Set("Content-Type", mcp.ContentTypeJSON)
	w.WriteHeader(r.Status())
	_, _ = w.Write(b)
}
