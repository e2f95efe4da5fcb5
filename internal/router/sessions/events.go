package sessions

import (
	"container/list"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// Resumability (2025-03-26 to 2025-11-25): every event on a stored
// session's SSE streams gets an id "<stream>/<seq>" and is kept in the
// session's log, so a client that loses a stream reconnects with GET and
// Last-Event-ID and receives the rest of that stream — and the response —
// exactly once. A lost POST stream does not cancel its call (the spec says
// a disconnect is not a cancellation); the call runs on and its events are
// logged for the reconnect.
//
// The logs are bounded (Limits): per session, and for all sessions of the
// process together. Trimming drops a session's oldest events first, and
// under the process-wide bound the oldest sessions' logs first. A replay
// that asks for trimmed events gets ErrPurged, never a silent gap.
const (
	// RetryMillis is the reconnection delay suggested to clients.
	RetryMillis = 500
	// StandaloneStream names the session's GET stream in event ids.
	StandaloneStream = "g"
	// gonePerSession bounds how many completed, fully trimmed streams a
	// log still remembers, to answer ErrPurged rather than "unknown".
	gonePerSession = 64
)

// ErrPurged: the events a replay asks for were trimmed from the log.
var ErrPurged = errors.New("sessions: the requested events were trimmed from the replay log")

// ErrUnknownStream: the log never had the stream (or forgot it long ago).
var ErrUnknownStream = errors.New("sessions: no such stream in this session's replay log")

// EventStore keeps the replay logs of stored sessions.
type EventStore interface {
	// Log returns session's log, made on first use.
	Log(session string) EventLog
	// Drop forgets session's log: the session ended.
	Drop(session string)
}

// EventLog is one session's replay log.
type EventLog interface {
	// Open registers a stream before its first event, so that a client
	// that lost it right after the priming event can still resume it.
	// request is the id of the request the stream answers (nil for the
	// standalone stream).
	Open(stream string, request jsonrpc.ID)
	// Append logs data on stream and returns its event id.
	Append(stream string, data []byte) string
	// Finish marks stream complete: its final event was logged.
	Finish(stream string)
	// Since returns the events of stream after seq. Its error is
	// ErrUnknownStream, or ErrPurged (with Replay.Request set) when events
	// after seq were trimmed.
	Since(stream string, seq int) (Replay, error)
}

// Replay is what Since found.
type Replay struct {
	Events   []Event
	Complete bool            // the stream's final event was logged
	Request  jsonrpc.ID      // the request the stream answers
	Wake     <-chan struct{} // closed at the stream's next event, or its end
}

// Event is one logged event of a stream.
type Event struct {
	Stream string
	Seq    int
	Data   []byte
}

// ID is the event's SSE id.
func (e Event) ID() string { return EventID(e.Stream, e.Seq) }

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

// Limits bound what a MemoryEvents keeps (config sessions.replay).
type Limits struct {
	SessionEvents int   // events per session
	SessionBytes  int64 // bytes of event data per session (its newest event is kept whatever its size)
	TotalBytes    int64 // bytes of event data for all sessions
}

// EventMetrics is told what the store does (metrics.Metrics is one).
type EventMetrics interface {
	ReplayBytes(n int64)
	ReplayTrimmed(n int, bound string)
	ReplayPurged()
}

// MemoryEvents is the EventStore of one process: the logs live in memory,
// with the replica that holds their sessions.
type MemoryEvents struct {
	limits  Limits
	metrics EventMetrics

	mu    sync.Mutex // guards everything below and every log's state
	bytes int64
	logs  map[string]*memoryLog
	order *list.List // of *memoryLog, oldest session first
}

// NewMemoryEvents makes a store bounded by limits, reporting to m (nil: nowhere).
func NewMemoryEvents(limits Limits, m EventMetrics) *MemoryEvents {
	if m == nil {
		m = noEventMetrics{}
	}
	return &MemoryEvents{limits: limits, metrics: m, logs: map[string]*memoryLog{}, order: list.New()}
}

type noEventMetrics struct{}

func (noEventMetrics) ReplayBytes(int64)         {}
func (noEventMetrics) ReplayTrimmed(int, string) {}
func (noEventMetrics) ReplayPurged()             {}

// Log implements EventStore.
func (s *MemoryEvents) Log(session string) EventLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.logs[session]; l != nil {
		return l
	}
	l := &memoryLog{store: s, streams: map[string]*streamState{}}
	l.elem = s.order.PushBack(l)
	s.logs[session] = l
	return l
}

// Drop implements EventStore.
func (s *MemoryEvents) Drop(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[session]
	if l == nil {
		return
	}
	delete(s.logs, session)
	s.order.Remove(l.elem)
	s.bytes -= l.bytes
	l.dropped = true
	for _, st := range l.streams {
		st.wakeAll()
	}
	s.metrics.ReplayBytes(s.bytes)
}

// Bytes is how much event data the store holds.
func (s *MemoryEvents) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// memoryLog is one session's log in a MemoryEvents.
type memoryLog struct {
	store   *MemoryEvents
	elem    *list.Element
	events  []Event // oldest first
	bytes   int64
	dropped bool // the session ended: nothing more is kept

	streams map[string]*streamState
	gone    []goneStream // completed streams whose events were all trimmed, oldest first
}

// goneStream is a pruned stream, remembered to answer ErrPurged.
type goneStream struct {
	stream  string
	request jsonrpc.ID
}

// streamState is what a log knows of one stream.
type streamState struct {
	request jsonrpc.ID
	next    int  // the last seq given out
	trimmed int  // the highest seq trimmed away (0: none)
	logged  int  // events of the stream still in the log
	done    bool // the final event was logged
	wake    chan struct{}
}

func (st *streamState) wakeAll() {
	if st.wake != nil {
		close(st.wake)
		st.wake = nil
	}
}

func (l *memoryLog) Open(stream string, request jsonrpc.ID) {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if _, ok := l.streams[stream]; !ok {
		l.streams[stream] = &streamState{request: request}
	}
}

func (l *memoryLog) Append(stream string, data []byte) string {
	s := l.store
	s.mu.Lock()
	defer s.mu.Unlock()
	st := l.streams[stream]
	if st == nil {
		st = &streamState{}
		l.streams[stream] = st
	}
	st.next++
	if !l.dropped {
		l.events = append(l.events, Event{stream, st.next, data})
		l.bytes += int64(len(data))
		s.bytes += int64(len(data))
		st.logged++
		// The session's own bounds, then the process's: oldest sessions first.
		n := 0
		for len(l.events) > s.limits.SessionEvents || (l.bytes > s.limits.SessionBytes && len(l.events) > 1) {
			l.trimOldest()
			n++
		}
		if n > 0 {
			s.metrics.ReplayTrimmed(n, metrics.ReplayBoundSession)
		}
		if s.bytes > s.limits.TotalBytes {
			s.trimTotal(l)
		}
		s.metrics.ReplayBytes(s.bytes)
	}
	st.wakeAll()
	return EventID(stream, st.next)
}

// trimOldest drops the log's oldest event (caller holds the store's lock).
func (l *memoryLog) trimOldest() {
	e := l.events[0]
	l.events[0] = Event{}
	l.events = l.events[1:]
	l.bytes -= int64(len(e.Data))
	l.store.bytes -= int64(len(e.Data))
	st := l.streams[e.Stream]
	if st == nil {
		return
	}
	st.trimmed = max(st.trimmed, e.Seq)
	st.logged--
	st.wakeAll() // a replay waiting on it must learn that it lost events
	if st.done && st.logged == 0 {
		l.forget(e.Stream)
	}
}

// forget prunes a completed stream whose events are all gone, remembering
// (boundedly) that it existed.
func (l *memoryLog) forget(stream string) {
	st := l.streams[stream]
	delete(l.streams, stream)
	if len(l.gone) == gonePerSession {
		l.gone = l.gone[1:]
	}
	l.gone = append(l.gone, goneStream{stream, st.request})
}

// trimTotal drops events, oldest sessions first, until the store is within
// its bound; the event just appended to keep stays.
func (s *MemoryEvents) trimTotal(keep *memoryLog) {
	n := 0
	for e := s.order.Front(); e != nil && s.bytes > s.limits.TotalBytes; {
		l := e.Value.(*memoryLog)
		min := 0
		if l == keep {
			min = 1
		}
		if len(l.events) <= min {
			e = e.Next()
			continue
		}
		l.trimOldest()
		n++
	}
	if n > 0 {
		s.metrics.ReplayTrimmed(n, metrics.ReplayBoundTotal)
	}
}

func (l *memoryLog) Finish(stream string) {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	st := l.streams[stream]
	if st == nil {
		return
	}
	st.done = true
	st.wakeAll()
	if st.logged == 0 {
		l.forget(stream)
	}
}

func (l *memoryLog) Since(stream string, seq int) (Replay, error) {
	s := l.store
	s.mu.Lock()
	defer s.mu.Unlock()
	st := l.streams[stream]
	if st == nil {
		for _, g := range l.gone {
			if g.stream == stream {
				s.metrics.ReplayPurged()
				return Replay{Request: g.request}, ErrPurged
			}
		}
		return Replay{}, ErrUnknownStream
	}
	if seq < st.trimmed {
		s.metrics.ReplayPurged()
		return Replay{Request: st.request}, ErrPurged
	}
	r := Replay{Complete: st.done, Request: st.request}
	for _, e := range l.events {
		if e.Stream == stream && e.Seq > seq {
			r.Events = append(r.Events, e)
		}
	}
	if st.wake == nil {
		st.wake = make(chan struct{})
	}
	r.Wake = st.wake
	return r, nil
}
