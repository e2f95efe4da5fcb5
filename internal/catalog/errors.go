package catalog

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/telemetry"
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
	var ee *credentials.ExchangeError
	if errors.As(err, &ee) {
		return &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: ee.Error()}
	}
	var ce *credentials.CredentialError
	if errors.As(err, &ce) {
		return &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: ce.Error()}
	}
	return nil
}

// What went wrong on the way to an upstream is the operator's to read, not
// the caller's: a stdio child's last stderr lines (a secret it printed,
// another user's data: a shared child serves everyone), an HTTP upstream's
// 401 body echoing the credential mcpgw sent, a connection error naming
// internal hosts. So an error the gateway composes from a transport
// failure tells the caller which upstream failed and the request id, and
// the detail goes to the log (whose secrets are redacted) under that id.
// Fail closed: only errors known to be the gateway's own words (timeouts,
// refusals of its bounds, the caller's own credential, ownWords) keep
// their text.
// An upstream's own JSON-RPC error answer is not a failure: it passes
// through as it came.

// upstreamFailure is the caller's error for a request to upstream that
// failed in transport (err), logged with its detail.
func upstreamFailure(ctx context.Context, u *host.Upstream, method string, err error) *jsonrpc.Error {
	if msg, ok := ownWords(err); ok {
		return &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: msg}
	}
	id := requestID(ctx)
	u.Logger().Warn("a request to the upstream failed; its caller was told only the request id",
		zap.String("request_id", id), zap.String("method", method), zap.Error(err))
	var ue *host.UnavailableError
	if errors.As(err, &ue) {
		return jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "%s (request id %s; the gateway's log has the cause)", ue.Summary(), id)
	}
	return jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "upstream %q failed to answer %s (request id %s; the gateway's log has the cause)", u.Name(), method, id)
}

// ownWords is the message of a failure that is the gateway's own refusal,
// written for the caller and quoting nothing of the upstream's: a stateful
// stdio session's child on another replica, a shared upstream session the
// upstream forgot. ok false for any other.
func ownWords(err error) (msg string, ok bool) {
	var ue *host.UnavailableError
	if errors.As(err, &ue) && ue.Cause != nil {
		err = ue.Cause
	}
	var ae *host.AffinityError
	var sg *client.SessionGoneError
	switch {
	case errors.As(err, &ae):
		return ae.Error(), true
	case errors.As(err, &sg):
		return sg.Error(), true
	}
	return "", false
}

// requestID is the id of the downstream request ctx belongs to; a request
// without one (an internal call) gets a new one, so that its error and log
// line still meet.
func requestID(ctx context.Context) string {
	if r := telemetry.RequestRefFrom(ctx); r != nil {
		if id := r.RequestID(); id != "" {
			return id
		}
	}
	return rand.Text()
}

// unavailableError is the caller's error for a request for which no
// connection to upstream could be had (err from ClientFor).
func unavailableError(ctx context.Context, u *host.Upstream, upstream, method string, err error) *jsonrpc.Error {
	if gerr := connectError(ctx, upstream, err); gerr != nil {
		return gerr
	}
	u.Metrics().Unavailable()
	return upstreamFailure(ctx, u, method, err)
}
