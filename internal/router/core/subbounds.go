package core

import (
	"fmt"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
)

// Resource subscriptions and listen streams are held for as long as a
// client likes, so each is bounded (DESIGN.md invariant 7): the
// subscriptions of one session and of one principal, the listen streams
// of one principal, and the length of a subscribed URI. A principal's
// shares apply to authenticated principals; without auth every caller is
// the one anonymous principal and only the per-session bound applies, as
// for the other per-principal shares.

// subLimits are the subscription bounds in force for sess, with the
// defaults for a route not made from a config (tests).
type subLimits struct {
	perSession, perPrincipal, listenPerPrincipal, uriBytes int
}

func subscriptionLimits(sess *Session) subLimits {
	var l Limits
	if rte := sess.Route(); rte != nil && rte.Gen != nil {
		l = rte.Gen.Limits
	}
	or := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return subLimits{
		perSession:         or(l.MaxSubscriptionsPerSession, config.DefaultMaxSubscriptionsPerSession),
		perPrincipal:       or(l.MaxSubscriptionsPerPrincipal, config.DefaultMaxSubscriptionsPerPrincipal),
		listenPerPrincipal: or(l.MaxListenStreamsPerPrincipal, config.DefaultMaxListenStreamsPerPrincipal),
		uriBytes:           or(l.MaxSubscriptionURIBytes, config.DefaultMaxSubscriptionURIBytes),
	}
}

// refuse counts a refusal by r's bound and returns it as a JSON-RPC error.
func (c *Core) refuse(r *limits.Refusal) *jsonrpc.Error {
	c.Metrics().LimitRefused(r.Bound)
	return r.JSONRPC()
}

// checkSubscriptionURI refuses a URI longer than
// sessions.max_subscription_uri_bytes: a subscription keeps its URI for
// as long as it lives.
func (c *Core) checkSubscriptionURI(sess *Session, uri string) *jsonrpc.Error {
	max := subscriptionLimits(sess).uriBytes
	if len(uri) <= max {
		return nil
	}
	c.Metrics().LimitRefused("sessions.max_subscription_uri_bytes")
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "mcpgw: the resource URI to subscribe to is %d bytes, more than sessions.max_subscription_uri_bytes (%d); subscribe to a shorter URI, or raise sessions.max_subscription_uri_bytes", len(uri), max)
}

// admitSubscriptionLocked counts one more subscription for sess, or
// refuses it when the session's or its principal's bound is full. st.mu
// is held.
func (st *subscriptions) admitLocked(sess *Session) *limits.Refusal {
	l := subscriptionLimits(sess)
	if st.perSession[sess] >= l.perSession {
		return &limits.Refusal{Bound: "sessions.max_subscriptions_per_session", Max: l.perSession, What: "resource subscriptions on this session", PerPrincipal: true, RetryAfter: 1}
	}
	if sess.owner != "" && st.perPrincipal[sess.owner] >= l.perPrincipal {
		return &limits.Refusal{Bound: "sessions.max_subscriptions_per_principal", Max: l.perPrincipal, What: "resource subscriptions for this principal", PerPrincipal: true, RetryAfter: 1}
	}
	st.perSession[sess]++
	if sess.owner != "" {
		st.perPrincipal[sess.owner]++
	}
	return nil
}

// releaseLocked forgets one subscription of sess. st.mu is held.
func (st *subscriptions) releaseLocked(sess *Session) {
	if n := st.perSession[sess] - 1; n > 0 {
		st.perSession[sess] = n
	} else {
		delete(st.perSession, sess)
	}
	if sess.owner == "" {
		return
	}
	if n := st.perPrincipal[sess.owner] - 1; n > 0 {
		st.perPrincipal[sess.owner] = n
	} else {
		delete(st.perPrincipal, sess.owner)
	}
}

// tooManyListenURIs refuses a subscriptions/listen naming more resources
// than one session may subscribe to: it would be refused in part anyway,
// and its fan-out is the client's to bound, not the gateway's to absorb.
func (c *Core) tooManyListenURIs(sess *Session, n int) *jsonrpc.Error {
	l := subscriptionLimits(sess)
	if n <= l.perSession {
		return nil
	}
	return c.refuse(&limits.Refusal{Bound: "sessions.max_subscriptions_per_session", Max: l.perSession, What: fmt.Sprintf("resource subscriptions in one subscriptions/listen (%d named)", n), PerPrincipal: true, RetryAfter: 1})
}
