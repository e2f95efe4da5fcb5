package streamable

import (
	"net/http"

	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// resumableWriter writes a legacy session's stream, logging each event
// first so that it survives the connection.
type resumableWriter struct {
	log    *sessions.EventLog
	stream string
	sw     *sse.Writer
	live   bool // the connection still takes writes
}

func newResumableWriter(w http.ResponseWriter, log *sessions.EventLog, stream string, prime bool) *resumableWriter {
	log.Open(stream)
	rw := &resumableWriter{log: log, stream: stream, sw: sse.NewWriter(w), live: true}
	if prime {
		// 2025-11-25: an event with an id and empty data, so the client can
		// resume even before the first real event, and how long to wait.
		rw.live = rw.sw.Write(sse.Event{ID: sessions.EventID(stream, 0), Data: []byte{}, Retry: sessions.RetryMillis}) == nil
	}
	return rw
}

// write logs data, then sends it if the connection is still there.
func (rw *resumableWriter) write(data []byte) {
	id := rw.log.Append(rw.stream, data)
	if rw.live {
		rw.live = rw.sw.Write(sse.Event{ID: id, Name: "message", Data: data}) == nil
	}
}

// replay serves a GET with Last-Event-ID: the rest of that stream, then, if
// it is still running, its live events until its response. It reports false
// when the id names no stream of this session.
func replay(w http.ResponseWriter, r *http.Request, sess *sessions.Session, lastID string, m *metrics.Metrics) bool {
	stream, seq, ok := sessions.ParseEventID(lastID)
	if !ok || stream == sessions.StandaloneStream {
		return false
	}
	if _, _, known, _ := sess.Events.Since(stream, seq); !known {
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
		events, complete, _, wake := sess.Events.Since(stream, seq)
		for _, e := range events {
			if sw.Write(sse.Event{ID: e.ID(), Name: "message", Data: e.Data}) != nil {
				return true
			}
			seq = e.Seq
		}
		if complete {
			return true
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return true
		case <-sess.Context().Done():
			return true
		}
	}
}
