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
	if n := st.Reap(func(*Session) time.Duration { return time.Hour }); n != 1 {
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
	if n := st.Reap(func(*Session) time.Duration { return time.Hour }); n != 3 {
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

// fakeRevocations is a fleet's revocation list in memory.
type fakeRevocations struct {
	mu      sync.Mutex
	ttl     map[string]time.Duration
	watcher func(string)
}

func (f *fakeRevocations) Revoke(id string, ttl time.Duration) {
	f.mu.Lock()
	f.ttl[id] = ttl
	f.mu.Unlock()
}

func (f *fakeRevocations) Revoked(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.ttl[id]
	return ok
}

func (f *fakeRevocations) Watch(fn func(string)) { f.watcher = fn }

// A DELETE revokes the id for the fleet with the token's remaining life;
// idle reaping does not (another replica may serve the session); a
// revoked id is not rehydrated, and a revocation published by another
// replica ends the copy held here.
func TestStoreRevocations(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	key := make([]byte, 32)
	rev := &fakeRevocations{ttl: map[string]time.Duration{}}
	newStore := func() *Store {
		return NewStore(StoreOptions{Keys: [][]byte{key}, Events: NewMemoryEvents(Limits{SessionEvents: 8, SessionBytes: 1 << 10, TotalBytes: 1 << 10}, nil), Revocations: rev, Now: clock.now})
	}
	here, there := newStore(), newStore()
	rte := testRoute(10)
	p := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	deleted, _ := here.Create(rte, mcp.Version20251125, nil, nil, p)
	reaped, _ := here.Create(rte, mcp.Version20251125, nil, nil, p)
	moved, _ := here.Create(rte, mcp.Version20251125, nil, nil, p)
	clock.advance(2 * time.Hour)

	if s, _ := there.Rehydrate(moved.ID(), rte, p); s == nil {
		t.Fatal("a sealed id not revoked was refused elsewhere")
	}
	here.Delete(deleted.ID())
	here.Reap(func(*Session) time.Duration { return time.Hour }) // reaped and moved end here, idle
	if got, want := rev.ttl[deleted.ID()], 22*time.Hour; got != want {
		t.Errorf("revoked for %v, want the token's remaining %v", got, want)
	}
	if rev.Revoked(reaped.ID()) {
		t.Error("an idle end was revoked for the whole fleet")
	}
	for name, tc := range map[string]struct {
		id   string
		want bool
	}{"deleted": {deleted.ID(), false}, "reaped here": {reaped.ID(), true}} {
		if s, _ := there.Rehydrate(tc.id, rte, p); (s != nil) != tc.want {
			t.Errorf("%s: rehydrated elsewhere = %v, want %v", name, s != nil, tc.want)
		}
	}
	// Another replica revokes moved: the copy there ends.
	there.revoked.Revoke(moved.ID(), time.Hour)
	rev.watcher(sessionHash(moved.ID()))
	if there.Lookup(moved.ID()) != nil {
		t.Error("a session revoked elsewhere is still held")
	}
}
