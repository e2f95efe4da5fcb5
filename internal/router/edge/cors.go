package edge

import (
	"net/http"
	"strings"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

// CORS lets browser pages on the allowed origins call the gateway with
// fetch: a page's cross-origin request is sent (and its answer readable)
// only if the server says so. It runs after the Checks, which have
// already refused an Origin that is not allowed, so every Origin it sees
// may be answered; a request without Origin is no browser's cross-origin
// request and gets nothing.
//
// A preflight (OPTIONS with Access-Control-Request-Method) is answered
// here, before authentication: browsers never send credentials on it.
func CORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			preflight(w, r)
			return
		}
		h.Set("Access-Control-Expose-Headers", exposedHeaders)
		next.ServeHTTP(w, r)
	})
}

// exposedHeaders are the answer headers MCP clients read.
var exposedHeaders = strings.Join([]string{
	mcp.HeaderSessionID, mcp.HeaderProtocolVersion, "WWW-Authenticate", "Retry-After", "X-Request-Id",
	"DPoP-Nonce", // a browser DPoP client retries with it (RFC 9449 section 9)
}, ", ")

// corsMethods are the methods of the MCP endpoints.
const corsMethods = "GET, POST, DELETE"

// preflight answers an allowed origin's preflight: 204 naming the methods
// and the request headers MCP uses, or 403 for a method or header that no
// MCP endpoint takes (the browser then does not send the request).
func preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	switch m := r.Header.Get("Access-Control-Request-Method"); m {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		http.Error(w, "method "+m+" is not served here; MCP uses "+corsMethods, http.StatusForbidden)
		return
	}
	var asked []string
	for _, v := range r.Header.Values("Access-Control-Request-Headers") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			if !corsRequestHeader(name) {
				http.Error(w, "request header "+name+" is not one MCP uses", http.StatusForbidden)
				return
			}
			asked = append(asked, name)
		}
	}
	h.Set("Access-Control-Allow-Methods", corsMethods)
	if len(asked) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(asked, ", "))
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// corsRequestHeader reports whether name is a request header MCP clients
// send: the bearer token, the content negotiation, the session and
// revision, resumption, and 2026-07-28's mirrored Mcp-Method, Mcp-Name
// and Mcp-Param-* headers.
func corsRequestHeader(name string) bool {
	switch strings.ToLower(name) {
	case "authorization", "content-type", "accept", "mcp-session-id", "mcp-protocol-version",
		"last-event-id", "mcp-method", "mcp-name", "x-request-id", "traceparent", "tracestate", "baggage",
		"dpop": // the proof of a DPoP-bound token
		return true
	}
	p := mcp.HeaderParamPrefix
	return len(name) > len(p) && strings.EqualFold(name[:len(p)], p)
}
