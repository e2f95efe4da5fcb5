package router

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpgw/mcpgw/internal/sse"
)

// Resumability (2025-03-26 to 2025-11-25): every event on a legacy session's
// SSE streams gets an id "<stream>/<seq>" and is kept in a bounded
// per-session log, so a client that loses a stream reconnects with GET and
// Last-Event-ID and receives the rest of that stream — and the response —
// exactly once. A lost POST stream does not cancel its call (the spec says a
// disconnect is not a cancellation); the call runs on and its events are
// logged for the reconnect.
const (
	maxLoggedEvents = 512
	maxLoggedBytes  = 4 << 20
	// retryMillis is the reconnection delay suggested to clients.
	retryMillis = 500
	// standaloneStream names the session's GET stream in event ids.
	standaloneStream = "g"
)

type loggedEvent struct {
	stream string
	seq    int
	data   []byte
}

// eventLog is one session's replay buffer.
type eventLog struct {
	mu     sync.Mutex
	events []loggedEvent
	bytes  int
	next   map[string]int           // next seq per stream
	done   map[string]bool          // streams whose response was logged
	wake   map[string]chan struct{} // closed on every append to a stream
}

func newEventLog() *eventLog {
	return &eventLog{next: map[string]int{}, done: map[string]bool{}, wake: map[string]chan struct{}{}}
}

// open registers a stream before its first event, so a client that lost it
// right after the priming event can still resume it.
func (l *eventLog) open(stream string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.next[stream]; !ok {
		l.next[stream] = 0
	}
}

// append logs data on stream and returns its event id.
func (l *eventLog) append(stream string, data []byte) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next[stream]++
	seq := l.next[stream]
	l.events = append(l.events, loggedEvent{stream, seq, data})
	l.bytes += len(data)
	for len(l.events) > maxLoggedEvents || (l.bytes > maxLoggedBytes && len(l.events) > 1) {
		l.bytes -= len(l.events[0].data)
		l.events = l.events[1:]
	}
	if ch, ok := l.wake[stream]; ok {
		close(ch)
		delete(l.wake, stream)
	}
	return eventID(stream, seq)
}

// finish marks stream complete: its final event was logged.
func (l *eventLog) finish(stream string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done[stream] = true
	if ch, ok := l.wake[stream]; ok {
		close(ch)
		delete(l.wake, stream)
	}
}

// since returns the logged events of stream after seq, whether the stream
// is complete, whether the stream is known at all, and a channel closed on
// the next append.
func (l *eventLog) since(stream string, seq int) (out []loggedEvent, complete, known bool, wake chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, known = l.next[stream]
	for _, e := range l.events {
		if e.stream == stream && e.seq > seq {
			out = append(out, e)
		}
	}
	ch, ok := l.wake[stream]
	if !ok {
		ch = make(chan struct{})
		l.wake[stream] = ch
	}
	return out, l.done[stream], known, ch
}

func eventID(stream string, seq int) string { return stream + "/" + strconv.Itoa(seq) }

func parseEventID(id string) (stream string, seq int, ok bool) {
	stream, n, found := strings.Cut(id, "/")
	if !found || stream == "" {
		return "", 0, false
	}
	seq, err := strconv.Atoi(n)
	return stream, seq, err == nil && seq >= 0
}

// resumableWriter writes a legacy session's stream, logging each event
// first so that it survives the connection.
type resumableWriter struct {
	log    *eventLog
	stream string
	sw     *sse.Writer
	live   bool // the connection still takes writes
}

func newResumableWriter(w http.ResponseWriter, log *eventLog, stream string, prime bool) *resumableWriter {
	log.open(stream)
	rw := &resumableWriter{log: log, stream: stream, sw: sse.NewWriter(w), live: true}
	if prime {
		// 2025-11-25: an event with an id and empty data, so the client can
		// resume even before the first real event, and how long to wait.
		rw.live = rw.sw.Write(sse.Event{ID: eventID(stream, 0), Data: []byte{}, Retry: retryMillis}) == nil
	}
	return rw
}

// write logs data, then sends it if the connection is still there.
func (rw *resumableWriter) write(data []byte) {
	id := rw.log.append(rw.stream, data)
	if rw.live {
		rw.live = rw.sw.Write(sse.Event{ID: id, Name: "message", Data: data}) == nil
	}
}

// replay serves a GET with Last-Event-ID: the rest of that stream, then, if
// it is still running, its live events until its response. It reports false
// when the id names no stream of this session.
func (rt *Router) replay(w http.ResponseWriter, r *http.Request, sess *Session, lastID string) bool {
	stream, seq, ok := parseEventID(lastID)
	if !ok || stream == standaloneStream {
		return false
	}
	if _, _, known, _ := sess.events.since(stream, seq); !known {
		return false
	}
	sw := sse.NewWriter(w)
	for {
		events, complete, _, wake := sess.events.since(stream, seq)
		for _, e := range events {
			if sw.Write(sse.Event{ID: eventID(e.stream, e.seq), Name: "message", Data: e.data}) != nil {
				return true
			}
			seq = e.seq
		}
		if complete {
			return true
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return true
		case <-sess.ctx.Done():
			return true
		}
	}
}
