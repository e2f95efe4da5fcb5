package catalog

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// callerGone is the error of a call whose caller went away — cancelled it,
// or ran out of time — whatever the upstream was doing meanwhile (starting,
// being replaced by a reload, breaking): the caller's end is the cause, and
// "unavailable" would send an operator looking at a healthy upstream. nil
// while ctx is live.
func callerGone(ctx context.Context, upstream string) *jsonrpc.Error {
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return jsonrpc.Errorf(mcp.CodeRequestTimeout, "upstream %q: the request ran out of time before it could be sent", upstream)
	default:
		return jsonrpc.Errorf(mcp.CodeRequestTimeout, "upstream %q: request cancelled", upstream)
	}
}

// connectError is the error of a call for which no connection could be
// had, when it is not "unavailable": the caller went away, or a bound
// (a stateful upstream's session slots) refused it. nil otherwise.
func connectError(ctx context.Context, upstream string, err error) *jsonrpc.Error {
	if gone := callerGone(ctx, upstream); gone != nil {
		return gone
	}
	var lr *limits.Refusal
	if errors.As(err, &lr) {
		return lr.JSONRPC()
	}
	return credentialError(err)
}

// credentialError is the answer to a call whose upstream credential could
// not be had for the caller (nil for other errors): a user who must
// authorize the gateway first gets URLElicitationRequiredError (-32042)
// with the authorization URL (the router may turn it into a tool error for
// a client without elicitation.url); a refused token exchange gets its
// message, which names the upstream and the authorization server's error.
func credentialError(err error) *jsonrpc.Error {
	var are *credentials.AuthorizationRequiredError
	if errors.As(err, &are) {
		type elicitation struct {
			Mode          string `json:"mode"`
			ElicitationID string `json:"elicitationId"`
			URL           string `json:"url"`
			Message       string `json:"message"`
		}
		data, _ := json.Marshal(map[string][]elicitation{"elicitations": {{Mode: "url", ElicitationID: are.ElicitationID, URL: are.URL, Message: are.Error()}}})
		return &jsonrpc.Error{Code: mcp.CodeURLElicitationRequired, Message: are.Error(), Data: data}
	}
	var ee *host.ExchangeError
	if errors.As(err, &ee) {
		return &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: ee.Error()}
	}
	var ce *host.CredentialError
	if errors.As(err, &ce) {
		return &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: ce.Error()}
	}
	return nil
}
