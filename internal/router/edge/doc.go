// Package edge is the HTTP boundary every downstream request crosses
// before a transport handles it: request ids and the request's logger,
// Host (DNS rebinding) and Origin checks, authentication middleware and its
// RFC 6750 / RFC 9728 refusals, and the JSON-RPC bodies of HTTP-level
// answers (errors, body limits, parse errors). It knows nothing of
// sessions or routing.
package edge
