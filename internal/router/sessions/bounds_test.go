package sessions

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

func testRoute(maxSessions int) *core.Route {
	return &core.Route{Path: "/mcp", Gen: &core.Generation{Limits: core.Limits{MaxSessions: maxSessions, MaxSessionsPerPrincipal: maxSessions}}}
}

func sealedStore(t testing.TB) *Store {
	keys, err := ParseSessionKeys([]byte("00112233445566778899aabbccddeeff\n"))
	if err != nil {
		t.Fatal(err)
	}
	return NewStore(StoreOptions{Keys: keys, Events: NewMemoryEvents(Limits{SessionEvents: 8, SessionBytes: 1 << 10, TotalBytes: 1 << 20}, nil)})
}

// An ended sealed id is refused here until it would expire, but the ids
// remembered are bounded — endedPerSession per sessions.max_sessions, the
// oldest forgotten first (accepted again, as after a restart). The old
// store kept every ended id in a map it scanned on each DELETE.
func TestEndedSessionsBounded(t *testing.T) {
	st := sealedStore(t)
	rt := testRoute(2)
	limit := endedPerSession * 2
	var ids []string
	for range limit + 5 {
		s, err := st.Create(rt, "2025-11-25", nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID())
		st.Remove(s.ID())
	}
	if n := st.ended.len(); n != limit {
		t.Errorf("%d ended ids remembered, want the bound %d", n, limit)
	}
	roomy := testRoute(100) // the same path, room to keep what is rehydrated
	for i, id := range ids {
		s, err := st.Rehydrate(id, roomy, nil)
		if err != nil {
			t.Fatal(err)
		}
		if forgotten := i < 5; (s != nil) != forgotten {
			t.Errorf("ended id %d: rehydrated %v, want %v", i, s != nil, forgotten)
		}
	}
}

func TestEndedSetExpiry(t *testing.T) {
	var e endedSet
	t0 := time.Now()
	e.add("a", t0, time.Hour, 100)
	e.add("b", t0.Add(30*time.Minute), time.Hour, 100)
	e.add("a", t0.Add(40*time.Minute), time.Hour, 100) // ended twice: once
	if e.len() != 2 || !e.has("a") || !e.has("b") {
		t.Fatalf("len %d, a %v, b %v", e.len(), e.has("a"), e.has("b"))
	}
	e.add("c", t0.Add(61*time.Minute), time.Hour, 100)
	if e.has("a") || !e.has("b") || !e.has("c") || e.len() != 2 {
		t.Errorf("after an hour: a %v b %v c %v len %d; want a expired", e.has("a"), e.has("b"), e.has("c"), e.len())
	}
	for i := range 1000 { // the consumed front is reclaimed
		e.add(fmt.Sprint(i), t0.Add(2*time.Hour+time.Duration(i)*time.Second), time.Minute, 100)
	}
	if e.len() > 61 || len(e.order)-e.head != e.len() || len(e.order) > 2*e.len()+65 {
		t.Errorf("len %d, order %d (head %d)", e.len(), len(e.order), e.head)
	}
}

// A serial connection's session is never a Streamable one (Get), and its
// id is not sealed (no replica can recreate it).
func TestSerialSessionsAreNotStreamable(t *testing.T) {
	st := sealedStore(t)
	rt := testRoute(10)
	s, err := st.CreateSerial(rt, &auth.Principal{Subject: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Get(s.ID(), rt) != nil {
		t.Error("Get served a serial session")
	}
	if st.Lookup(s.ID()) != s {
		t.Error("Lookup lost the serial session")
	}
	if r, _ := st.Rehydrate(s.ID(), rt, &auth.Principal{Subject: "a"}); r != nil {
		t.Error("a serial session's id was rehydrated")
	}
}

// BenchmarkRemoveSealed: ending a sealed session with many ended ids
// remembered. The scan it replaced cost O(ended) under the store lock per
// DELETE (~1 ms at 100,000); now it is O(1).
func BenchmarkRemoveSealed(b *testing.B) {
	st := sealedStore(b)
	rt := testRoute(10000)
	for i := range 100000 {
		st.ended.add(fmt.Sprint("old", i), time.Now(), sessionTokenMaxAge, endedPerSession*10000)
	}
	b.ResetTimer()
	for b.Loop() {
		s, err := st.Create(rt, "2025-11-25", nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		st.Remove(s.ID())
	}
}
