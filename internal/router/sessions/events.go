package sessions

import (
	"strconv"
	"strings"
	"sync"
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
	// RetryMillis is the reconnection delay suggested to clients.
	RetryMillis = 500
	// StandaloneStream names the session's GET stream in event ids.
	StandaloneStream = "g"
)

// Event is one logged event of a stream.
type Event struct {
	Stream string
	Seq    int
	Data   []byte
}

// ID is the event's SSE id.
func (e Event) ID() string { return EventID(e.Stream, e.Seq) }

// EventLog is one session's replay buffer.
type EventLog struct {
	mu     sync.Mutex
	events []Event
	bytes  int
	next   map[string]int           // next seq per stream
	done   map[string]bool          // streams whose response was logged
	wake   map[string]chan struct{} // closed on every append to a stream
}

// NewEventLog makes an empty log.
func NewEventLog() *EventLog {
	return &EventLog{next: map[string]int{}, done: map[string]bool{}, wake: map[string]chan struct{}{}}
}

// Open registers a stream before its first event, so a client that lost it
// right after the priming event can still resume it.
func (l *EventLog) Open(stream string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.next[stream]; !ok {
		l.next[stream] = 0
	}
}

// Append logs data on stream and returns its event id.
func (l *EventLog) Append(stream string, data []byte) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next[stream]++
	seq := l.next[stream]
	l.events = append(l.events, Event{stream, seq, data})
	l.bytes += len(data)
	for len(l.events) > maxLoggedEvents || (l.bytes > maxLoggedBytes && len(l.events) > 1) {
		l.bytes -= len(l.events[0].Data)
		l.events = l.events[1:]
	}
	if ch, ok := l.wake[stream]; ok {
		close(ch)
		delete(l.wake, stream)
	}
	return EventID(stream, seq)
}

// Finish marks stream complete: its final event was logged.
func (l *EventLog) Finish(stream string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done[stream] = true
	if ch, ok := l.wake[stream]; ok {
		close(ch)
		delete(l.wake, stream)
	}
}

// Since returns the logged events of stream after seq, whether the stream
// is complete, whether the stream is known at all, and a channel closed on
// the next append.
func (l *EventLog) Since(stream string, seq int) (out []Event, complete, known bool, wake chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, known = l.next[stream]
	for _, e := range l.events {
		if e.Stream == stream && e.Seq > seq {
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

// EventID is the SSE id of event seq of stream.
func EventID(stream string, seq int) string { return stream + "/" + strconv.Itoa(seq) }

// ParseEventID reads an id made by EventID.
func ParseEventID(id string) (stream string, seq int, ok bool) {
	stream, n, found := strings.Cut(id, "/")
	if !found || stream == "" {
		return "", 0, false
	}
	seq, err := strconv.Atoi(n)
	return stream, seq, err == nil && seq >= 0
}
