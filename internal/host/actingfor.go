package host

// Connections of an upstream that acts for its callers (internal/
// credentials: exchanged, per_user, forwarded). MCP servers bind their
// sessions to the user they were opened for, so such an upstream never
// shares a connection between callers: each downstream session gets its
// own (the stateful machinery, stateful.go), and a stateless caller one
// per principal. A connection captures its principal when it is made
// (credentials.Cell) and is authorized for that principal only
// (credentials.Upstream.ActingClient); it is only ever used for the
// principal that made it.
//
// Its shared connection (the catalog's lists, health) carries the
// upstream's own credential, oauth: or an Authorization header; without
// one there is no shared connection at all (nothing could authorize it),
// and every list goes through the caller's own connection.

import (
	"context"
	"errors"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/credentials"
)

// CredentialKind is what the upstream's calls carry (credentials.
// Upstream.Kind). Audit records carry it.
func (u *Upstream) CredentialKind() credentials.Kind { return u.creds.Kind() }

// ActsForCaller reports whether the upstream's requests run as their
// caller (exchanged, per-user or forwarded credentials).
func (u *Upstream) ActsForCaller() bool { return u.creds.ActsForCaller() }

// ListsActForCaller reports whether the upstream's lists go through the
// caller's own connection (it acts for callers and has no shared one), so
// that what one caller is shown is no other caller's.
func (u *Upstream) ListsActForCaller() bool { return u.onDemand() }

// onDemand reports whether the upstream has no shared connection: it acts
// for callers and has no credential of its own to open one with.
func (u *Upstream) onDemand() bool {
	return u.ActsForCaller() && !u.creds.HasOwn() && u.host.opts.Transport == nil
}

// principalConnPrefix marks the connection key of a stateless caller of
// an acting-for upstream (a session key never starts with it).
const principalConnPrefix = "principal\x00"

// ownConnection is the key of the connection a request must use instead
// of the shared one ("" for the shared one): the session's own for a
// stateful or acting-for upstream, and for a stateless caller of an
// acting-for upstream the principal's own.
func (u *Upstream) ownConnection(ctx context.Context) (string, error) {
	key := sessionFrom(ctx)
	if key != "" && (u.cfg.Stateful || u.ActsForCaller()) {
		return key, nil
	}
	if !u.ActsForCaller() {
		return "", nil
	}
	p := auth.FromContext(ctx)
	if p == nil {
		return "", &credentials.CredentialError{Upstream: u.name, Err: errors.New("the request is not authenticated, so there is no caller to act for (configure auth.oidc)")}
	}
	return principalConnPrefix + p.Key(), nil
}
