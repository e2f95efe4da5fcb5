package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// stuckStream is a call's stream whose client never reads: every Emit
// blocks until release. The first is reported on emitted; later ones
// (after release, while the test drains) are not, so that the pump never
// waits on a test that has stopped listening.
type stuckStream struct {
	emitted chan []byte
	release chan struct{}
}

func (s *stuckStream) Emit(b []byte) {
	select {
	case s.emitted <- b:
	default:
	}
	<-s.release
}
func (*stuckStream) HoldPassed() {}

// TestCallQueueBoundedInBytes (issue 37.10): a call's event queue is
// bounded in bytes (sessions.queue_bytes), not only in messages: while
// its client does not read, 64 log messages of 256 KiB each queue no more
// than the bound (the rest are dropped, as hints are), and a
// 512 KiB server→client request past it is refused to the upstream at once with
// -32004 naming the key. Before the fix all 64 queued (16 MiB) and the
// request waited for room.
func TestCallQueueBoundedInBytes(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), metrics.Options{NoRuntimeCollectors: true})
	c := New(nil, Options{Metrics: m})
	defer c.Close(func() {})
	const bound = 1 << 20
	gen := &Generation{ByPath: map[string]*Route{}, Limits: Limits{QueueBytes: bound, QueueTotalBytes: 64 << 20}}
	rte := &Route{Path: "/mcp", Gen: gen}
	sess := NewSession("q", rte, mcp.Version20251125, json.RawMessage(`{"sampling":{}}`), nil, nil)
	defer sess.End()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	out := &stuckStream{emitted: make(chan []byte, 1), release: make(chan struct{})}
	s := &served{}
	s.stream = CallStream{ctx: ctx, sess: sess, pump: &s.pump}
	s.pump.core, s.pump.sess, s.pump.out = c, sess, out
	params, _ := json.Marshal(map[string]string{"level": "info", "data": strings.Repeat("x", 256<<10)})
	s.stream.Notify(mcp.NotificationMessage, params)
	select { // the pump took the first and is stuck writing it
	case <-out.emitted:
	case <-time.After(10 * time.Second): // the failure's deadline, not a wait
		t.Fatal("the pump did not start")
	}
	for range 63 {
		s.stream.Notify(mcp.NotificationMessage, params)
	}
	big, _ := json.Marshal(map[string]any{"messages": []any{}, "systemPrompt": strings.Repeat("y", 512<<10), "maxTokens": 1})
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second) // unfixed, it waits for room
	defer rcancel()
	res, jerr := s.stream.Request(rctx, mcp.MethodSamplingCreateMessage, big)
	if jerr == nil || jerr.Code != mcp.CodeRateLimited || !strings.Contains(jerr.Message, "sessions.queue_bytes") {
		t.Errorf("a request past the bound: %s %+v, want -32004 naming sessions.queue_bytes", res, jerr)
	}
	close(out.release)
	q := s.pump.finish()
	held, n := 0, 0
	for len(q) > 0 {
		b := <-q
		c.ReleaseQueued(sess, len(b))
		held += len(b)
		n++
	}
	t.Logf("%d messages, %d bytes queued behind the stuck one", n, held)
	if held > bound {
		t.Errorf("%d bytes (%d messages) queued for a client that does not read, want at most sessions.queue_bytes (%d)", held, n, bound)
	}
	if per, total := c.Queued(sess); per != 0 || total != 0 {
		t.Errorf("after the queue drained %d bytes are still charged to the session, %d to the process; want 0", per, total)
	}
	if limitRefusals(t, m, "sessions.queue_bytes") < 1 {
		t.Error("mcpgw_limit_refusals_total{bound=sessions.queue_bytes} not counted")
	}
}
