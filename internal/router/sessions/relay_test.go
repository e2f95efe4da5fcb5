package sessions

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// fleetOptions are one replica's Redis options, counting into reg.
func fleetOptions(t *testing.T, addr string, reg *prometheus.Registry) RedisOptions {
	return fleetOptionsTB(t, addr, reg)
}

func fleetOptionsTB(t testing.TB, addr string, reg *prometheus.Registry) RedisOptions {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})
	return RedisOptions{Client: c, Prefix: "t:", TTL: time.Minute, Queue: 16, Timeout: 200 * time.Millisecond, Metrics: m.NewRedis()}
}

func counterWith(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// inbox collects what a relay delivers.
type inbox struct {
	mu  sync.Mutex
	got []string
}

func (b *inbox) deliver(m []byte) {
	b.mu.Lock()
	b.got = append(b.got, string(m))
	b.mu.Unlock()
}

func (b *inbox) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(testwait.Long)
	for {
		b.mu.Lock()
		got := append([]string(nil), b.got...)
		b.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
}

// A message published on replica B for a session whose stream replica A
// holds reaches A's stream, once; one for a session nobody holds is
// counted as no_stream; after the hold is released nothing more arrives;
// with Redis stopped publishing fails (counted) without blocking, and once
// Redis is back A's hold is subscribed again without being asked.
func TestRedisRelay(t *testing.T) {
	srv := redistest.Start(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, b := NewRedisRelay(fleetOptions(t, srv.Addr, regA)), NewRedisRelay(fleetOptions(t, srv.Addr, regB))
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)

	var box inbox
	release := a.Hold("session-1", box.deliver)
	// The subscription is asynchronous on the server side: publish until
	// it is seen.
	deadline := time.Now().Add(testwait.Long)
	for counterWith(t, regB, "mcpgw_redis_relayed_total", metrics.RedisRelayDelivered) == 0 {
		b.Publish("session-1", []byte("hello"))
		if time.Now().After(deadline) {
			t.Fatal("the held session's channel never had a subscriber")
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
	}
	if got := box.wait(t, 1); len(got) == 0 || got[0] != "hello" {
		t.Fatalf("delivered %q, want hello", got)
	}
	before := len(box.wait(t, 0))
	b.Publish("session-2", []byte("nobody"))
	waitCounter(t, regB, metrics.RedisRelayNoStream, 1)
	if got := box.wait(t, 0); len(got) != before {
		t.Errorf("session-1's stream got another session's message: %q", got)
	}

	release()
	release() // idempotent
	b.Publish("session-1", []byte("after release"))
	waitCounter(t, regB, metrics.RedisRelayNoStream, 2)

	release = a.Hold("session-1", box.deliver)
	defer release()
	srv.Stop()
	start := time.Now()
	for range 50 {
		b.Publish("session-1", []byte("down"))
	}
	// Waiting on Redis would cost a timeout (200ms) per message: 10s.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("publishing 50 messages with Redis down took %s: Publish must never wait on Redis", d)
	}
	if counterWith(t, regB, "mcpgw_redis_relayed_total", metrics.RedisRelayDropped)+counterWith(t, regB, "mcpgw_redis_relayed_total", metrics.RedisRelayFailed) == 0 {
		t.Error("messages lost with Redis down were not counted")
	}
	srv.Restart()
	n := len(box.wait(t, 0))
	deadline = time.Now().Add(testwait.Long)
	for len(box.wait(t, 0)) == n {
		b.Publish("session-1", []byte("back"))
		if time.Now().After(deadline) {
			t.Fatal("after Redis came back the held stream got nothing: not resubscribed")
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
}

func waitCounter(t *testing.T, reg *prometheus.Registry, outcome string, want float64) {
	t.Helper()
	deadline := time.Now().Add(testwait.Long)
	for counterWith(t, reg, "mcpgw_redis_relayed_total", outcome) < want {
		if time.Now().After(deadline) {
			t.Fatalf("mcpgw_redis_relayed_total{outcome=%q} = %v, want %v", outcome, counterWith(t, reg, "mcpgw_redis_relayed_total", outcome), want)
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
}

// A subscription is held by the first replica that records it; another
// is told it is held elsewhere; the holder may record it again; a release
// through B reaches A's watcher naming the session (and no other), and
// frees the record.
func TestRedisSubscriptions(t *testing.T) {
	srv := redistest.Start(t)
	a := NewRedisSubscriptions(fleetOptions(t, srv.Addr, prometheus.NewRegistry()), "A")
	b := NewRedisSubscriptions(fleetOptions(t, srv.Addr, prometheus.NewRegistry()), "B")
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	type drop struct {
		mine, other bool
		upstream    string
		uri         string
	}
	drops := make(chan drop, 4)
	a.Watch(func(match func(string) bool, upstream, uri string) {
		drops <- drop{match("s1"), match("s2"), upstream, uri}
	})
	b.Watch(func(func(string) bool, string, string) { t.Error("B was told of its own release") })
	// The watchers subscribe asynchronously: wait until Redis has both.
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	testwait.Until(t, "both watchers to be subscribed", func() bool {
		n, err := rc.PubSubNumSub(context.Background(), a.channel()).Result()
		return err == nil && n[a.channel()] >= 2
	})

	for _, step := range []struct {
		who  *RedisSubscriptions
		uri  string
		want bool
	}{
		{a, "file:///x", true},
		{b, "file:///x", false}, // held by A
		{a, "file:///x", true},  // A's own
		{b, "file:///y", true},  // another resource
	} {
		if got := step.who.Hold("s1", "up", step.uri); got != step.want {
			t.Errorf("%s.Hold(s1, %s) = %v, want %v", step.who.replica, step.uri, got, step.want)
		}
	}
	b.Release("s1", "up", "file:///x")
	select {
	case d := <-drops:
		if !d.mine || d.other || d.upstream != "up" || d.uri != "file:///x" {
			t.Errorf("A was told %+v, want s1's up file:///x", d)
		}
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		t.Fatal("A was not told of B's release")
	}
	if !b.Hold("s1", "up", "file:///x") {
		t.Error("after the release B cannot hold the subscription")
	}
}

// SetKeys rotates the ring without dropping a session: a token sealed
// before opens after the rotation and on a replica started with the new
// ring; new tokens are sealed with the new key (a replica with only the
// old key cannot open them); a store without a ring refuses one.
func TestStoreSetKeysRotates(t *testing.T) {
	k1, _ := ParseSessionKeys([]byte("00112233445566778899aabbccddeeff\n"))
	k2, _ := ParseSessionKeys([]byte("q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n"))
	rotated := append(append([][]byte{}, k2...), k1...)
	rte := testRoute(10)
	p := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	store := func(keys [][]byte) *Store {
		return NewStore(StoreOptions{Keys: keys, Events: NewMemoryEvents(Limits{SessionEvents: 8, SessionBytes: 1 << 10, TotalBytes: 1 << 10}, nil)})
	}
	a := store(k1)
	before, err := a.Create(rte, mcp.Version20251125, nil, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetKeys(rotated); err != nil {
		t.Fatal(err)
	}
	after, err := a.Create(rte, mcp.Version20251125, nil, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		keys [][]byte
		id   string
		want bool
	}{
		{"old session, rotated ring", rotated, before.ID(), true},
		{"new session, rotated ring", rotated, after.ID(), true},
		{"new session, old key only", k1, after.ID(), false},
		{"old session, new key only", k2, before.ID(), false},
	} {
		s, err := store(c.keys).Rehydrate(c.id, rte, p)
		if got := err == nil && s != nil; got != c.want {
			t.Errorf("%s: opened %v, want %v (err %v)", c.name, got, c.want, err)
		}
	}
	if err := store(nil).SetKeys(rotated); err == nil {
		t.Error("SetKeys on a store without a ring: no error")
	}
}
