package streamable

import (
	"errors"
	"net/http"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// resumableWriter writes a stored session's stream, logging each event
// first so that it survives the connection.
type resumableWriter struct {
	log    sessions.EventLog
	stream string
	sw     *sse.Writer
	live   bool                  // the connection still takes writes
	held   bool                  // the headers and priming event are written but not yet flushed
	cutter sessions.StreamCutter // nil: the log does not care
}

// cut tells the log that the stream's connection is gone before its end was
// delivered: with sessions.redis that is when the stream is copied for the
// other replicas (a stream delivered whole never is). Safe from any
// goroutine, and more than once.
func (rw *resumableWriter) cut() {
	if rw.cutter != nil {
		rw.cutter.Cut(rw.stream)
	}
}

// sent records the outcome of a write: the first failure is the cut.
func (rw *resumableWriter) sent(err error) {
	rw.live = err == nil
	if !rw.live {
		rw.cut()
	}
}

// newHeldWriter opens stream's log and its SSE response. On 2025-11-25
// (prime) the stream starts with a priming event — an id and empty data,
// so the client can resume even before the first real event, and how long
// to wait — which is written with the headers but held: it goes out with
// the first event, or with flushPriming (a POST stream waits
// sessions.priming_hold for its call's first event, so that a quick answer
// takes one write).
func newHeldWriter(w http.ResponseWriter, log sessions.EventLog, stream string, request jsonrpc.ID, prime bool) *resumableWriter {
	log.Open(stream, request)
	rw := &resumableWriter{log: log, stream: stream, sw: sse.NewWriterHeld(w), live: true}
	rw.cutter, _ = log.(sessions.StreamCutter)
	if !prime {
		rw.sent(rw.sw.Flush()) // a gone client shows at once
		return rw
	}
	rw.sent(rw.sw.WriteLast(sse.Event{ID: sessions.EventID(stream, 0), Data: []byte{}, Retry: sessions.RetryMillis}))
	rw.held = rw.live
	return rw
}

// newResumableWriter is newHeldWriter with the headers and priming event
// sent at once (a GET stream has no first event to wait for).
func newResumableWriter(w http.ResponseWriter, log sessions.EventLog, stream string, request jsonrpc.ID, prime bool) *resumableWriter {
	rw := newHeldWriter(w, log, stream, request, prime)
	rw.flushPriming()
	return rw
}

// flushPriming sends the held headers and priming event now.
func (rw *resumableWriter) flushPriming() {
	if rw.held {
		rw.held = false
		rw.sent(rw.sw.Flush())
	}
}

// Emit and HoldPassed are write and flushPriming for core.Serve.
func (rw *resumableWriter) Emit(data []byte) { rw.write(data) }
func (rw *resumableWriter) HoldPassed()      { rw.flushPriming() }

// write logs data, then sends it if the connection is still there.
func (rw *resumableWriter) write(data []byte) {
	id := rw.log.Append(rw.stream, data)
	if rw.live {
		rw.held = false // flushed with this event
		rw.sent(rw.sw.Write(sse.Event{ID: id, Name: "message", Data: data}))
	}
}

// writeLast is write for the stream's last event (its response): it goes
// out with the end of the HTTP response, in one write.
func (rw *resumableWriter) writeLast(data []byte) {
	id := rw.log.Append(rw.stream, data)
	if rw.live {
		rw.sent(rw.sw.WriteLast(sse.Event{ID: id, Name: "message", Data: data}))
	}
}

// replay serves a GET with Last-Event-ID: the rest of that stream, then, if
// it is still running, its live events until its response. It reports false
// when the id names no stream of this session. When the log no longer has
// what the client missed, the stream answers its request with
// CodeEventsPurged instead of leaving a silent gap. A session holds at
// most sessions.max_replay_streams replays open at once (refusals counted
// in m).
func replay(w http.ResponseWriter, r *http.Request, sess *sessions.Session, lastID string, m *metrics.Metrics) bool {
	stream, seq, ok := sessions.ParseEventID(lastID)
	if !ok || stream == sessions.StandaloneStream {
		return false
	}
	rep, err := sess.Events.Since(stream, seq)
	if errors.Is(err, sessions.ErrUnknownStream) {
		return false
	}
	// Each replay holds a connection and a goroutine until its stream
	// completes: a session opens at most sessions.max_replay_streams.
	if max := sess.Route().Gen.Limits.MaxReplayStreams; !sess.OpenReplay(max) {
		m.LimitRefused("sessions.max_replay_streams")
		(&limits.Refusal{Bound: "sessions.max_replay_streams", Max: max, What: "Last-Event-ID streams open on this session", PerPrincipal: true, RetryAfter: 1}).Write(w, nil)
		return true
	}
	defer sess.CloseReplay()
	sw := sse.NewWriter(w)
	for {
		if err != nil {
			if b, eerr := jsonrpc.Encode(jsonrpc.NewError(rep.Request, purged(lastID))); eerr == nil {
				_ = sw.Write(sse.Event{Name: "message", Data: b})
			}
			return true
		}
		for _, e := range rep.Events {
			if sw.Write(sse.Event{ID: e.ID(), Name: "message", Data: e.Data}) != nil {
				return true
			}
			seq = e.Seq
		}
		if rep.Complete {
			return true
		}
		select {
		case <-rep.Wake:
		case <-r.Context().Done():
			return true
		case <-sess.Context().Done():
			return true
		}
		rep, err = sess.Events.Since(stream, seq)
	}
}

// purged is the answer to a request whose stream's events after lastID
// were trimmed from the replay log.
func purged(lastID string) *jsonrpc.Error {
	return jsonrpc.Errorf(mcp.CodeEventsPurged, "mcpgw: the events of this stream after %s were trimmed from the session's replay log (bounded by sessions.replay), so the rest of the stream and the answer are lost; the call may have run: send the request again only if that is safe", lastID)
}
