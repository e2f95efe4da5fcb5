package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// replica is one process's view of the shared store.
type replica struct {
	events *RedisEvents
	reg    *prometheus.Registry
}

func newReplica(t *testing.T, addr string, lim Limits, queue int) *replica {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})
	ev := NewRedisEvents(NewMemoryEvents(lim, m), m, RedisOptions{
		Client: c, Prefix: "t:", Limits: lim, TTL: time.Minute, Queue: queue,
		Timeout: 200 * time.Millisecond, Poll: 20 * time.Millisecond, Grace: 300 * time.Millisecond, Metrics: m.NewRedis(),
	})
	t.Cleanup(ev.Close)
	return &replica{events: ev, reg: reg}
}

func (r *replica) counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// eventually retries since until it returns without ErrUnknownStream and
// done says it is what the test waits for (the copy is asynchronous).
func eventually(t *testing.T, since func() (Replay, error), done func(Replay, error) bool) (Replay, error) {
	t.Helper()
	deadline := time.Now().Add(testwait.Long)
	for {
		r, err := since()
		if done(r, err) || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
}

// cut tells l that stream's connection went away, as streamable does.
func cut(t *testing.T, l EventLog, stream string) {
	t.Helper()
	c, ok := l.(StreamCutter)
	if !ok {
		t.Fatalf("%T is not a StreamCutter", l)
	}
	c.Cut(stream)
}

func datas(r Replay) string {
	var b []string
	for _, e := range r.Events {
		b = append(b, fmt.Sprintf("%d=%s", e.Seq, e.Data))
	}
	return strings.Join(b, ",")
}

func TestRedisEventsAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	lim := Limits{SessionEvents: 6, SessionBytes: 1 << 20, TotalBytes: 1 << 20}
	a, b := newReplica(t, srv.Addr, lim, 100), newReplica(t, srv.Addr, lim, 100)
	complete := func(r Replay, err error) bool { return err == nil && r.Complete }

	tests := []struct {
		name    string
		events  int
		after   int
		want    string
		wantErr error
	}{
		{"the events after Last-Event-ID, exactly", 3, 1, "2=e2,3=e3", nil},
		{"the client has them all", 3, 3, "", nil},
		{"from the priming event", 2, 0, "1=e1,2=e2", nil},
		{"within the length cap", 8, 5, "6=e6,7=e7,8=e8", nil},
		{"trimmed by the length cap: purged", 8, 1, "", ErrPurged},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			session := fmt.Sprintf("s%d", i)
			la := a.events.Log(session)
			la.Open("x", jsonrpc.ID(`7`))
			for n := 1; n <= tt.events; n++ {
				la.Append("x", []byte(fmt.Sprintf("e%d", n)))
			}
			cut(t, la, "x") // its client went away: B may be asked for it
			la.Finish("x")
			lb := b.events.Log(session)
			r, err := eventually(t, func() (Replay, error) { return lb.Since("x", tt.after) },
				func(r Replay, err error) bool { return complete(r, err) || errors.Is(err, ErrPurged) })
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Since(x, %d) on B: %v, want %v", tt.after, err, tt.wantErr)
			}
			if got := datas(r); got != tt.want {
				t.Errorf("Since(x, %d) on B = %q, want %q", tt.after, got, tt.want)
			}
			if string(r.Request) != "7" {
				t.Errorf("request = %s, want 7 (the purged answer names it)", r.Request)
			}
		})
	}
	t.Run("a stream Redis never had is purged, not unknown", func(t *testing.T) {
		// A replica cannot tell a stream never copied from one whose
		// copies were all lost: a resume must not get a silent nothing.
		// It waits Grace for a late copy first: an empty, running replay.
		a.events.Log("s-u").Open("x", jsonrpc.ID(`1`))
		lb := b.events.Log("s-u")
		r, err := lb.Since("nope", 2)
		if err != nil || r.Complete || len(r.Events) > 0 || r.Wake == nil {
			t.Fatalf("Since(nope) at first = %+v, %v; want an empty running replay", r, err)
		}
		start := time.Now()
		for err == nil && time.Since(start) < 5*time.Second {
			<-r.Wake
			r, err = lb.Since("nope", 2)
		}
		if !errors.Is(err, ErrPurged) {
			t.Fatalf("Since(nope) after the grace = %v, want ErrPurged", err)
		}
	})
	t.Run("standalone stream stays local", func(t *testing.T) {
		a.events.Log("s-g").Append(StandaloneStream, []byte("hint"))
		// A negative check (nothing is copied to B): a wait cut short by
		// load only misses a failure, never makes one.
		time.Sleep(50 * time.Millisecond)
		if _, err := b.events.Log("s-g").Since(StandaloneStream, 0); !errors.Is(err, ErrUnknownStream) {
			t.Fatalf("Since(g) on B = %v, want ErrUnknownStream (each replica numbers its own)", err)
		}
	})
	t.Run("a stream still running elsewhere is followed", func(t *testing.T) {
		la, lb := a.events.Log("s-live"), b.events.Log("s-live")
		la.Open("x", jsonrpc.ID(`"c"`))
		la.Append("x", []byte("one"))
		r, err := eventually(t, func() (Replay, error) { return lb.Since("x", 0) }, func(r Replay, err error) bool { return err == nil && len(r.Events) == 1 })
		if err != nil || datas(r) != "1=one" || r.Complete || r.Wake == nil {
			t.Fatalf("first read = %q complete=%v wake=%v err=%v", datas(r), r.Complete, r.Wake != nil, err)
		}
		la.Append("x", []byte("two"))
		la.Finish("x")
		var got []string
		seq := 1
		for deadline := time.Now().Add(testwait.Long); time.Now().Before(deadline); {
			<-r.Wake
			if r, err = lb.Since("x", seq); err != nil {
				t.Fatal(err)
			}
			for _, e := range r.Events {
				got = append(got, string(e.Data))
				seq = e.Seq
			}
			if r.Complete {
				break
			}
		}
		if strings.Join(got, ",") != "two" || !r.Complete {
			t.Fatalf("followed %v complete=%v, want [two] and the end", got, r.Complete)
		}
	})
}

func TestRedisEventsRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	lim := Limits{SessionEvents: 1000, SessionBytes: 1 << 20, TotalBytes: 1 << 20}
	a, b := newReplica(t, srv.Addr, lim, 4), newReplica(t, srv.Addr, lim, 4)
	la, lb := a.events.Log("s"), b.events.Log("s")
	la.Open("x", jsonrpc.ID(`1`))
	la.Append("x", []byte("before"))
	if _, err := eventually(t, func() (Replay, error) { return lb.Since("x", 0) }, func(r Replay, err error) bool { return len(r.Events) == 1 }); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	// Appends never wait on Redis: many more than the queue holds return,
	// every one is kept locally, and the overflow is counted.
	for n := range 200 {
		la.Append("x", []byte(fmt.Sprintf("down%d", n)))
	}
	if r, err := la.Since("x", 0); err != nil || len(r.Events) != 201 {
		t.Fatalf("local replay while Redis is down: %d events, %v; want 201", len(r.Events), err)
	}
	if d := a.counter(t, "mcpgw_redis_dropped_total"); d == 0 {
		t.Error("mcpgw_redis_dropped_total = 0 with the queue overflowing")
	}
	// Another replica cannot tell what happened: it says the events are gone.
	if _, err := lb.Since("x", 1); !errors.Is(err, ErrPurged) {
		t.Fatalf("Since on B with Redis down = %v, want ErrPurged", err)
	}
	if e := b.counter(t, "mcpgw_redis_errors_total"); e == 0 {
		t.Error("mcpgw_redis_errors_total = 0 after a failed replay read")
	}

	srv.Restart()
	// The broken stream stays broken: its next entry says so.
	la.Append("x", []byte("after"))
	la.Finish("x")
	// Copies resume once the writer's backoff ends: wait for a probe.
	for n, deadline := 0, time.Now().Add(testwait.Long); ; n++ {
		p := fmt.Sprintf("probe%d", n)
		la.Open(p, jsonrpc.ID(`0`))
		cut(t, la, p)
		la.Finish(p)
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
		if r, err := lb.Since(p, 0); err == nil && r.Complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not recover within 10s of Redis returning")
		}
	}
	la.Open("y", jsonrpc.ID(`2`))
	la.Append("y", []byte("fresh"))
	cut(t, la, "y")
	la.Finish("y")
	r, err := eventually(t, func() (Replay, error) { return lb.Since("y", 0) }, func(r Replay, err error) bool { return err == nil && r.Complete })
	if err != nil || datas(r) != "1=fresh" {
		t.Fatalf("Since(y) on B after Redis returned = %q, %v", datas(r), err)
	}
	// Redis restarted empty, so x's earlier entries are gone: the broken
	// marker or the gap must make it purged, never a partial answer.
	if _, err := lb.Since("x", 1); !errors.Is(err, ErrPurged) {
		t.Fatalf("Since(x) on B after the outage = %v, want ErrPurged", err)
	}
}

func TestRedisEventsBrokenStreamAnswersPurged(t *testing.T) {
	// Redis stays up; the queue overflows: a hole in a stream's copy must
	// make a replay elsewhere answer purged.
	srv := redistest.Start(t)
	lim := Limits{SessionEvents: 1000, SessionBytes: 1 << 20, TotalBytes: 1 << 20}
	a, b := newReplica(t, srv.Addr, lim, 1), newReplica(t, srv.Addr, lim, 1)
	la, lb := a.events.Log("s"), b.events.Log("s")
	la.Open("x", jsonrpc.ID(`1`))
	for n := range 500 {
		la.Append("x", []byte(fmt.Sprintf("e%d", n)))
	}
	la.Finish("x")
	if a.counter(t, "mcpgw_redis_dropped_total") == 0 {
		t.Skip("the writer kept up with a queue of 1; nothing to check")
	}
	_, err := eventually(t, func() (Replay, error) { return lb.Since("x", 0) }, func(r Replay, err error) bool { return errors.Is(err, ErrPurged) })
	if !errors.Is(err, ErrPurged) {
		t.Fatalf("Since on B of a stream with lost copies = %v, want ErrPurged", err)
	}
}

func TestRedisRevocations(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	r1 := NewRedisRevocations(RedisOptions{Client: c, Prefix: "t:"})
	r2 := NewRedisRevocations(RedisOptions{Client: c, Prefix: "t:"})
	defer r1.Close()
	defer r2.Close()
	var mu sync.Mutex
	var seen []string
	r2.Watch(func(h string) { mu.Lock(); seen = append(seen, h); mu.Unlock() })
	// The subscription is made asynchronously: wait until Redis has it.
	testwait.Until(t, "the watcher to be subscribed", func() bool {
		n, err := c.PubSubNumSub(context.Background(), r2.channel()).Result()
		return err == nil && n[r2.channel()] >= 1
	})

	if r2.Revoked("s1.tok") {
		t.Fatal("Revoked before Revoke")
	}
	r1.Revoke("s1.tok", time.Hour)
	if !r2.Revoked("s1.tok") {
		t.Fatal("not Revoked on the other replica")
	}
	ttl, err := c.PTTL(context.Background(), "t:ended:"+sessionHash("s1.tok")).Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("TTL = %v, %v; want the token's remaining life (1h)", ttl, err)
	}
	r1.Revoke("s1.old", 0) // already expired: nothing to keep
	if r2.Revoked("s1.old") {
		t.Error("an expired token was written")
	}
	deadline := time.Now().Add(testwait.Long)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != sessionHash("s1.tok") {
		t.Fatalf("Watch saw %v, want the hash of s1.tok once", seen)
	}
	if strings.Contains(fmt.Sprint(seen), "s1.tok") {
		t.Fatal("the bearer id itself was published")
	}
}

// A DELETE that could not be recorded (Redis down) is kept and recorded
// once Redis answers: the other replicas refuse the id from then on.
func TestRedisRevocationsRetriedAfterOutage(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	r1 := NewRedisRevocations(RedisOptions{Client: c, Prefix: "t:", Timeout: 200 * time.Millisecond})
	r2 := NewRedisRevocations(RedisOptions{Client: c, Prefix: "t:", Timeout: 200 * time.Millisecond})
	defer r1.Close()
	defer r2.Close()
	srv.Stop()
	r1.Revoke("s1.down", time.Hour)
	if r1.Pending() != 1 {
		t.Fatalf("Pending() = %d after a failed Revoke, want 1", r1.Pending())
	}
	if r2.Revoked("s1.down") {
		t.Fatal("Revoked with Redis down: the check fails open (documented)")
	}
	srv.Restart()
	deadline := time.Now().Add(testwait.Long)
	for !r2.Revoked("s1.down") {
		if time.Now().After(deadline) {
			t.Fatal("the DELETE made during the outage was never recorded")
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
	if r1.Pending() != 0 {
		t.Errorf("Pending() = %d once recorded", r1.Pending())
	}
}

// A stream that ends delivered whole, nothing cut, within Hold, costs Redis
// nothing: no replica can be asked for it (issue 36: that copy was a third
// of a call's CPU in a fleet).
func TestRedisEventsDeliveredStreamNotCopied(t *testing.T) {
	srv := redistest.Start(t)
	lim := Limits{SessionEvents: 100, SessionBytes: 1 << 20, TotalBytes: 1 << 20}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	a := newReplica(t, srv.Addr, lim, 100)
	la := a.events.Log("s")
	la.Open("whole", jsonrpc.ID(`1`))
	la.Append("whole", []byte("answer"))
	la.Finish("whole")
	cut(t, la, "whole") // the client closing its connection afterwards is no cut
	// The writer is FIFO: once a cut stream queued later is in Redis, the
	// delivered one would be too if it had been queued.
	la.Open("probe", jsonrpc.ID(`2`))
	la.Append("probe", []byte("p"))
	cut(t, la, "probe")
	la.Finish("probe")
	key := "t:{s:" + sessionHash("s") + "}"
	var entries []redis.XMessage
	testwait.Until(t, "the cut probe stream copied to Redis", func() bool {
		var err error
		entries, err = c.XRange(context.Background(), key, "-", "+").Result()
		return err == nil && len(entries) == 3 // o, d, f
	})
	for _, e := range entries {
		if e.Values["s"] != "probe" {
			t.Errorf("Redis has an entry of %v, want only the cut stream's", e.Values)
		}
	}
}

// A stream nobody cut but still running after Hold is copied: its client
// may have lost it without this replica seeing (no FIN), and a replay
// elsewhere waits only Grace for it.
func TestRedisEventsLongStreamCopiedAfterHold(t *testing.T) {
	srv := redistest.Start(t)
	lim := Limits{SessionEvents: 100, SessionBytes: 1 << 20, TotalBytes: 1 << 20}
	a, b := newReplica(t, srv.Addr, lim, 100), newReplica(t, srv.Addr, lim, 100)
	la, lb := a.events.Log("s"), b.events.Log("s")
	la.Open("x", jsonrpc.ID(`1`))
	la.Append("x", []byte("one"))
	r, err := eventually(t, func() (Replay, error) { return lb.Since("x", 0) }, func(r Replay, err error) bool { return err == nil && len(r.Events) == 1 })
	if err != nil || datas(r) != "1=one" {
		t.Fatalf("Since(x) on B of a stream older than Hold = %q, %v", datas(r), err)
	}
	// From then on its entries go as they come, the end included.
	la.Append("x", []byte("two"))
	la.Finish("x")
	r, err = eventually(t, func() (Replay, error) { return lb.Since("x", 1) }, func(r Replay, err error) bool { return err == nil && r.Complete })
	if err != nil || datas(r) != "2=two" || !r.Complete {
		t.Fatalf("Since(x, 1) on B = %q complete=%v, %v", datas(r), r.Complete, err)
	}
}

// A stream with a second event (progress, a server→client request) is
// long: copied at once, not after Hold, and not left to a cut the replica
// may never see (a proxy in between keeps its own connection).
func TestRedisEventsSecondEventCopiedBeforeHold(t *testing.T) {
	srv := redistest.Start(t)
	lim := Limits{SessionEvents: 100, SessionBytes: 1 << 20, TotalBytes: 1 << 20}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	ev := NewRedisEvents(NewMemoryEvents(lim, nil), nil, RedisOptions{Client: c, Prefix: "t:", Limits: lim, Grace: time.Hour, Hold: time.Hour})
	t.Cleanup(ev.Close)
	l := ev.Log("s")
	l.Open("y", jsonrpc.ID(`2`))
	l.Append("y", []byte("progress"))
	l.Append("y", []byte("more progress"))
	l.Finish("y") // ended uncut, but long: kept in Redis
	key := "t:{s:" + sessionHash("s") + "}"
	testwait.Until(t, "the long stream's entries in Redis before Hold", func() bool {
		n, err := c.XLen(context.Background(), key).Result()
		return err == nil && n == 4 // o, d, d, f
	})
}
