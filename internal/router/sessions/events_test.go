package sessions

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// countingMetrics records what the store reports.
type countingMetrics struct {
	bytes   int64
	trimmed map[string]int
	purged  int
}

func (m *countingMetrics) ReplayBytes(n int64)               { m.bytes = n }
func (m *countingMetrics) ReplayTrimmed(n int, bound string) { m.trimmed[bound] += n }
func (m *countingMetrics) ReplayPurged()                     { m.purged++ }

func newTestStore(l Limits) (*MemoryEvents, *countingMetrics) {
	m := &countingMetrics{trimmed: map[string]int{}}
	return NewMemoryEvents(l, m), m
}

var roomy = Limits{SessionEvents: 100, SessionBytes: 1 << 20, TotalBytes: 1 << 20}

// seqs lists the seqs of a replay's events.
func seqs(r Replay) []int {
	var out []int
	for _, e := range r.Events {
		out = append(out, e.Seq)
	}
	return out
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEventLogReplay(t *testing.T) {
	s, _ := newTestStore(roomy)
	l := s.Log("s1")
	l.Open("a", jsonrpc.IntID(7))
	if r, err := l.Since("a", 0); err != nil || len(r.Events) != 0 || r.Complete {
		t.Fatalf("an opened stream without events: %+v, %v", r, err)
	}
	wake := mustSince(t, l, "a", 0).Wake
	if id := l.Append("a", []byte("one")); id != "a/1" {
		t.Errorf("first event id %q, want a/1", id)
	}
	select {
	case <-wake:
	default:
		t.Error("an append did not wake a waiting replay")
	}
	l.Append("b", []byte("other stream"))
	l.Append("a", []byte("two"))
	l.Finish("a")
	r := mustSince(t, l, "a", 0)
	if !equal(seqs(r), []int{1, 2}) || !r.Complete || string(r.Request) != "7" {
		t.Errorf("replay of a: seqs %v complete %v request %s; want [1 2], complete, request 7", seqs(r), r.Complete, r.Request)
	}
	if r := mustSince(t, l, "a", 1); !equal(seqs(r), []int{2}) {
		t.Errorf("replay after a/1: %v, want [2]", seqs(r))
	}
	if _, err := l.Since("nope", 0); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("unknown stream: %v, want ErrUnknownStream", err)
	}
	if s.Log("s1") != l {
		t.Error("Log made a second log for the same session")
	}
}

func mustSince(t *testing.T, l EventLog, stream string, seq int) Replay {
	t.Helper()
	r, err := l.Since(stream, seq)
	if err != nil {
		t.Fatalf("Since(%s, %d): %v", stream, seq, err)
	}
	return r
}

// A replay that asks for events a bound trimmed is told so (ErrPurged,
// with the request the stream answers), never given a silent gap.
func TestEventLogPurged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		data   []string
		after  int   // the client's Last-Event-ID seq
		purged bool  // want ErrPurged
		want   []int // else these seqs
	}{
		{"within bounds", roomy, []string{"a", "b", "c"}, 1, false, []int{2, 3}},
		{"event cap: gap", Limits{SessionEvents: 2, SessionBytes: 1 << 20, TotalBytes: 1 << 20}, []string{"a", "b", "c", "d"}, 1, true, nil},
		{"event cap: no gap", Limits{SessionEvents: 2, SessionBytes: 1 << 20, TotalBytes: 1 << 20}, []string{"a", "b", "c", "d"}, 2, false, []int{3, 4}},
		{"byte cap: gap", Limits{SessionEvents: 100, SessionBytes: 8, TotalBytes: 1 << 20}, []string{"1234", "5678", "9abc"}, 0, true, nil},
		{"byte cap keeps the newest", Limits{SessionEvents: 100, SessionBytes: 2, TotalBytes: 1 << 20}, []string{"big one", "bigger one"}, 1, false, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := newTestStore(tc.limits)
			l := s.Log("s")
			l.Open("c", jsonrpc.ID(`"req-1"`))
			for _, d := range tc.data {
				l.Append("c", []byte(d))
			}
			r, err := l.Since("c", tc.after)
			if tc.purged {
				if !errors.Is(err, ErrPurged) || string(r.Request) != `"req-1"` || m.purged != 1 {
					t.Fatalf("Since = %+v, %v (purged count %d); want ErrPurged naming request \"req-1\"", r, err, m.purged)
				}
				return
			}
			if err != nil || !equal(seqs(r), tc.want) {
				t.Fatalf("Since = %v, %v; want %v", seqs(r), err, tc.want)
			}
			if m.trimmed[metrics.ReplayBoundTotal] != 0 {
				t.Errorf("the process bound trimmed %d events", m.trimmed[metrics.ReplayBoundTotal])
			}
		})
	}
}

// The process-wide bound trims the oldest sessions' logs first and keeps
// the event just appended.
func TestEventStoreTotalBound(t *testing.T) {
	s, m := newTestStore(Limits{SessionEvents: 100, SessionBytes: 100, TotalBytes: 10})
	old, mid, young := s.Log("old"), s.Log("mid"), s.Log("young")
	old.Append("x", []byte("0123"))
	mid.Append("x", []byte("0123"))
	young.Append("x", []byte("01")) // 10 bytes: at the bound
	if m.trimmed[metrics.ReplayBoundTotal] != 0 || s.Bytes() != 10 {
		t.Fatalf("trimmed %v at the bound (bytes %d)", m.trimmed, s.Bytes())
	}
	young.Append("x", []byte("0123")) // 14: the oldest session pays
	if _, err := old.Since("x", 0); !errors.Is(err, ErrPurged) {
		t.Errorf("the oldest session's log: %v, want its event trimmed", err)
	}
	if r := mustSince(t, mid, "x", 0); len(r.Events) != 1 {
		t.Errorf("the middle session lost events: %v", seqs(r))
	}
	if s.Bytes() != 10 || m.bytes != 10 || m.trimmed[metrics.ReplayBoundTotal] != 1 {
		t.Errorf("bytes %d (reported %d), trimmed %v; want 10, 10, one by the total bound", s.Bytes(), m.bytes, m.trimmed)
	}
	young.Append("x", []byte("0123456789ab")) // alone over the bound: everything else goes, it stays
	if r := mustSince(t, young, "x", 2); !equal(seqs(r), []int{3}) {
		t.Errorf("the newest event was not kept: %v", seqs(r))
	}
	if _, err := mid.Since("x", 0); !errors.Is(err, ErrPurged) {
		t.Errorf("mid: %v, want trimmed", err)
	}
	s.Drop("young")
	if s.Bytes() != 0 || m.bytes != 0 {
		t.Errorf("after dropping the last log: %d bytes (reported %d)", s.Bytes(), m.bytes)
	}
}

// A completed stream whose events are all trimmed is pruned: its state
// goes, but a replay of it is still answered "purged", not "unknown".
func TestEventLogPrunesCompletedStreams(t *testing.T) {
	s, _ := newTestStore(Limits{SessionEvents: 2, SessionBytes: 1 << 20, TotalBytes: 1 << 20})
	l := s.Log("s").(*memoryLog)
	l.Open("done", jsonrpc.IntID(1))
	l.Append("done", []byte("answer"))
	l.Finish("done")
	l.Append("other", []byte("1"))
	l.Append("other", []byte("2")) // trims "done"'s only event
	if _, kept := l.streams["done"]; kept {
		t.Error("the completed, trimmed stream's state was kept")
	}
	r, err := l.Since("done", 0)
	if !errors.Is(err, ErrPurged) || string(r.Request) != "1" {
		t.Errorf("replay of the pruned stream: %+v, %v; want ErrPurged naming request 1", r, err)
	}
	l.Open("empty", jsonrpc.IntID(2))
	l.Finish("empty") // completed with nothing logged: pruned at once
	if _, kept := l.streams["empty"]; kept {
		t.Error("a completed stream without events was kept")
	}
	for i := range gonePerSession + 10 { // the memory of pruned streams is bounded
		id := "s" + strings.Repeat("x", i)
		l.Open(id, nil)
		l.Finish(id)
	}
	if len(l.gone) != gonePerSession {
		t.Errorf("%d pruned streams remembered, want %d", len(l.gone), gonePerSession)
	}
}

// A trim wakes a replay waiting on the stream, so that it learns it lost
// events rather than waiting for an append.
func TestEventLogTrimWakes(t *testing.T) {
	s, _ := newTestStore(Limits{SessionEvents: 1, SessionBytes: 1 << 20, TotalBytes: 1 << 20})
	l := s.Log("s")
	l.Open("a", nil)
	l.Append("a", []byte("1"))
	wake := mustSince(t, l, "a", 1).Wake
	l.Append("b", []byte("x")) // trims a/1
	select {
	case <-wake:
	default:
		t.Fatal("the trim did not wake the replay")
	}
	if _, err := l.Since("a", 0); !errors.Is(err, ErrPurged) {
		t.Errorf("Since after the trim: %v", err)
	}
}

// Stream ids are unique within a store and between stores (replicas of a
// fleet share a session's event ids), and survive an event id's round trip.
func TestNewStreamIDs(t *testing.T) {
	a, b := NewStore(StoreOptions{}), NewStore(StoreOptions{})
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		for _, st := range []*Store{a, b} {
			id := st.NewStreamID()
			if seen[id] {
				t.Fatalf("stream id %q made twice", id)
			}
			seen[id] = true
			if stream, seq, ok := ParseEventID(EventID(id, 7)); !ok || stream != id || seq != 7 {
				t.Fatalf("event id of stream %q reads back as %q, %d, %v", id, stream, seq, ok)
			}
		}
	}
}
