package core

import (
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/limits"
)

// What waits for a client to read it is bounded in bytes as well as in
// messages (DESIGN.md invariant 7): a message count alone let a client
// that never reads hold 128 answers of 1 MB each. One mechanism serves
// every such queue — a served call's event queue (serve.go) and a legacy
// HTTP+SSE or stdio session's queue (serial) — charging each message to
// its session (sessions.queue_bytes) and to the process
// (sessions.queue_total_bytes) while it waits, and releasing it when the
// client's writer takes it. What the queue's owner does with a refusal is
// its own: a hint is dropped, an answer becomes the refusal, a
// server→client request is refused to the upstream.

// ReserveQueued charges a message of n bytes waiting for sess's client,
// or refuses it, counting the refusal, when either bound is full. A
// message always fits a session that has nothing waiting, so that an
// answer larger than the session's bound still goes out (the process's
// bound still applies).
func (c *Core) ReserveQueued(sess *Session, n int) *limits.Refusal {
	per, total := queueLimits(sess)
	if s := sess.queued.Add(int64(n)); s > per && s != int64(n) {
		sess.queued.Add(-int64(n))
		sess.queueFull.Store(true)
		c.Metrics().LimitRefused("sessions.queue_bytes")
		return &limits.Refusal{Bound: "sessions.queue_bytes", Max: int(per), What: "bytes waiting for this session's client to read them", PerPrincipal: true, RetryAfter: 1}
	}
	if t := c.queued.Add(int64(n)); t > total {
		c.queued.Add(-int64(n))
		sess.queued.Add(-int64(n))
		c.Metrics().LimitRefused("sessions.queue_total_bytes")
		return &limits.Refusal{Bound: "sessions.queue_total_bytes", Max: int(total), What: "bytes waiting for clients to read them", RetryAfter: 1}
	}
	return nil
}

// ChargeQueued charges n bytes without a check: for the small error that
// replaces a refused message, which must go out.
func (c *Core) ChargeQueued(sess *Session, n int) {
	sess.queued.Add(int64(n))
	c.queued.Add(int64(n))
}

// ReleaseQueued releases what ReserveQueued or ChargeQueued charged.
func (c *Core) ReleaseQueued(sess *Session, n int) {
	sess.queued.Add(-int64(n))
	c.queued.Add(-int64(n))
	sess.queueFull.Store(false) // the client read something: there is room again
}

// QueueFull reports the bound a new request on sess would find full, or
// nil: once a message was refused for sessions.queue_bytes, until the
// client reads.
func (c *Core) QueueFull(sess *Session) *limits.Refusal {
	per, _ := queueLimits(sess)
	if !sess.queueFull.Load() {
		return nil
	}
	c.Metrics().LimitRefused("sessions.queue_bytes")
	return &limits.Refusal{Bound: "sessions.queue_bytes", Max: int(per), What: "bytes waiting for this session's client to read them", PerPrincipal: true, RetryAfter: 1}
}

// Queued is how many bytes wait for sess's client, and for every client.
func (c *Core) Queued(sess *Session) (session, total int64) {
	return sess.queued.Load(), c.queued.Load()
}

// queueLimits are sess's queue bounds, with the defaults for a route not
// made from a config (tests).
func queueLimits(sess *Session) (per, total int64) {
	per, total = config.DefaultQueueBytes, config.DefaultQueueTotalBytes
	if rte := sess.Route(); rte != nil && rte.Gen != nil {
		if l := rte.Gen.Limits; l.QueueBytes > 0 {
			per = l.QueueBytes
		}
		if l := rte.Gen.Limits; l.QueueTotalBytes > 0 {
			total = l.QueueTotalBytes
		}
	}
	return per, total
}
