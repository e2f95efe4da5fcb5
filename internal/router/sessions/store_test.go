package sessions

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Reap ends the sessions idle for longer than the timeout, but never one
// that a stream holds open or that has a request in flight; each ended
// session's context ends, its replay log goes and OnEnd is told.
func TestReap(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	events := NewMemoryEvents(Limits{SessionEvents: 8, SessionBytes: 1 << 10, TotalBytes: 1 << 10}, nil)
	var ended []string
	st := NewStore(StoreOptions{Events: events, Now: clock.now, OnEnd: func(s *Session) { ended = append(ended, s.ID()) }})
	rte := testRoute(10)
	p := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	create := func() *Session {
		s, err := st.Create(rte, mcp.Version20251125, nil, nil, p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	idle, streaming, busy, fresh := create(), create(), create(), create()
	idle.Events.Append("x", []byte("logged"))
	if !streaming.OpenStream() {
		t.Fatal("OpenStream")
	}
	busy.Track([]byte("1"), func() {})

	clock.advance(30 * time.Minute)
	fresh.Touch()
	clock.advance(31 * time.Minute) // 61 min for the others, 31 for fresh
	if n := st.Reap(time.Hour); n != 1 {
		t.Fatalf("reaped %d sessions, want 1", n)
	}
	if len(ended) != 1 || ended[0] != idle.ID() || st.Lookup(idle.ID()) != nil {
		t.Errorf("ended %v; want only the idle session", ended)
	}
	if idle.Context().Err() != context.Canceled {
		t.Error("the reaped session's context is still live")
	}
	if events.Bytes() != 0 {
		t.Errorf("the reaped session's replay log holds %d bytes", events.Bytes())
	}
	for name, s := range map[string]*Session{"streaming": streaming, "busy": busy, "fresh": fresh} {
		if st.Lookup(s.ID()) == nil {
			t.Errorf("the %s session was reaped", name)
		}
	}

	streaming.CloseStream() // used now: idle from here
	busy.Untrack([]byte("1"))
	clock.advance(2 * time.Hour)
	if n := st.Reap(time.Hour); n != 3 {
		t.Errorf("reaped %d sessions after the stream closed and the request ended, want 3", n)
	}
}

// A sealed session id (sessions.key_file) is honoured by another store with
// the key ring, for its route and principal, until it is too old.
func TestRehydrate(t *testing.T) {
	keys, err := ParseSessionKeys([]byte("00112233445566778899aabbccddeeff\n"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	opts := StoreOptions{Keys: keys, Events: NewMemoryEvents(Limits{SessionEvents: 1, SessionBytes: 1, TotalBytes: 1}, nil), Now: clock.now}
	a, b := NewStore(opts), NewStore(opts)
	rte := testRoute(10)
	alice := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	s, err := a.Create(rte, mcp.Version20250618, []byte(`{"sampling":{}}`), nil, alice)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rte  *core.Route
		p    *auth.Principal
		ok   bool
	}{
		{"another route", &core.Route{Path: "/other", Gen: rte.Gen}, alice, false},
		{"another principal", rte, &auth.Principal{Subject: "mallory", Issuer: "https://idp"}, false},
		{"its route and principal", rte, alice, true},
	} {
		got, err := b.Rehydrate(s.ID(), tc.rte, tc.p)
		if err != nil || (got != nil) != tc.ok {
			t.Fatalf("%s: rehydrated %v", tc.name, got != nil)
		}
		if got != nil && (got.Version() != mcp.Version20250618 || got.Owner() != alice.Key()) {
			t.Errorf("%s: recreated with %s, owner %q", tc.name, got.Version(), got.Owner())
		}
	}
	b.Remove(s.ID())
	if got, _ := b.Rehydrate(s.ID(), rte, alice); got != nil {
		t.Error("a session ended on this replica came back")
	}
	clock.advance(sessionTokenMaxAge + time.Minute)
	if got, _ := NewStore(opts).Rehydrate(s.ID(), rte, alice); got != nil {
		t.Error("an expired token opened")
	}
}
