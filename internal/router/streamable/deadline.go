package streamable

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// streamDeadline gives each write of a long-lived stream (the session's
// GET stream, a subscriptions/listen stream) sessions.sse_write_timeout,
// as the legacy HTTP+SSE transport does: a client that stops reading
// fills the network buffers, the write times out and the stream ends,
// instead of holding its handler and connection for as long as the
// client likes.
type streamDeadline struct {
	rc      *http.ResponseController
	timeout time.Duration
	armed   time.Time
}

// newStreamDeadline arms w's first write. The deadline stays on the
// connection, so it is not reused after the stream (Connection: close).
func newStreamDeadline(w http.ResponseWriter, rte *core.Route) *streamDeadline {
	d := &streamDeadline{rc: http.NewResponseController(w), timeout: rte.Gen.Limits.SSEWriteTimeout}
	if d.timeout <= 0 {
		d.timeout = config.DefaultSSEWriteTimeout // a route not made from a config (tests)
	}
	w.Header().Set("Connection", "close")
	d.arm()
	return d
}

// arm gives the next write the whole timeout (unsupported, as by tests'
// recorders: no bound).
func (d *streamDeadline) arm() {
	d.armed = time.Now()
	_ = d.rc.SetWriteDeadline(d.armed.Add(d.timeout))
}

// failed is for a write that failed: when it ran out of time, the refusal
// is counted and logged.
func (d *streamDeadline) failed(c *core.Core, log *zap.Logger, stream string, rte *core.Route) {
	if time.Since(d.armed) < d.timeout {
		return // the client went
	}
	c.Metrics().LimitRefused("sessions.sse_write_timeout")
	log.Warn("client did not read its "+stream+" stream; disconnected (sessions.sse_write_timeout)",
		zap.String("route", rte.Path), zap.Duration("sse_write_timeout", d.timeout))
}
