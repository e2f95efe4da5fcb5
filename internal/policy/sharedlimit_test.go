package policy

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
)

// Two Limiters over one Redis (two replicas) share their buckets: 20
// calls alternating between them get the bucket's 5 tokens between them,
// not 5 each (the rate, 1/min, refills nothing meanwhile); the refusal
// names its bucket and when a token comes back. (How closely a fleet
// holds a rate under load is measured by test/fleet, as real processes.)
func TestSharedBucketsAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	cfg := parseConfig(t, `policy:
  default: allow
  rate_limits:
    tools:
      - {tool: "github__hot", rate: 1/m, burst: 5}
    upstreams:
      github: {rate: 1000/s, burst: 1000}
`)
	var fallbacks atomic.Int64
	limiter := func() *Limiter {
		return NewLimiter(cfg.Policy.RateLimits, WithShared(NewRedisBuckets(c, "t:"), time.Second, func(error) { fallbacks.Add(1) }))
	}
	replicas := []*Limiter{limiter(), limiter()}
	p := Principal{Subject: "alice"}
	allowed := map[int]int{}
	var refusal Limited
	for i := range 20 {
		release, r := replicas[i%2].Allow(p, "github", "github__hot")
		release()
		if r.Allowed {
			allowed[i%2]++
		} else {
			refusal = r
		}
	}
	if allowed[0]+allowed[1] != 5 || allowed[0] == 0 || allowed[1] == 0 {
		t.Errorf("allowed %v: want 5 for the fleet, from both replicas", allowed)
	}
	if refusal.Limit != "tool github__hot" || refusal.RetryAfter <= 0 || refusal.RetryAfter > time.Minute {
		t.Errorf("refusal %+v: want tool github__hot, a token back within a minute", refusal)
	}
	if fallbacks.Load() != 0 {
		t.Errorf("%d fallbacks with Redis up", fallbacks.Load())
	}

	// All or none: a take refused by B spends nothing of A.
	ctx := context.Background()
	sb := NewRedisBuckets(c, "t:")
	a := SharedBucket{Key: "a", Interval: time.Hour, Burst: 2}
	b := SharedBucket{Key: "b", Interval: time.Hour, Burst: 1}
	for i, step := range []struct {
		buckets []SharedBucket
		ok      bool
		refused int
	}{
		{[]SharedBucket{a, b}, true, 0},
		{[]SharedBucket{a, b}, false, 1}, // b is empty
		{[]SharedBucket{a}, true, 0},     // a still had its second token
		{[]SharedBucket{a}, false, 0},
	} {
		ok, refused, retry, err := sb.Take(ctx, step.buckets)
		if err != nil || ok != step.ok || (!ok && (refused != step.refused || retry <= 0 || retry > time.Hour)) {
			t.Errorf("take %d: ok %v refused %d retry %s err %v; want ok %v refused %d", i, ok, refused, retry, err, step.ok, step.refused)
		}
	}
}

// fakeShared fails every Take.
type fakeShared struct{ err error }

func (f fakeShared) Take(context.Context, []SharedBucket) (bool, int, time.Duration, error) {
	return false, 0, 0, f.err
}

// When the shared buckets cannot be asked, the replica's own buckets
// decide (per-replica limits), and every such decision is reported.
func TestSharedBucketsFallBackToLocal(t *testing.T) {
	cfg := parseConfig(t, "policy:\n  default: allow\n  rate_limits:\n    principal: {rate: 1/s, burst: 2}\n")
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	var got []error
	down := errors.New("redis is down")
	l := NewLimiter(cfg.Policy.RateLimits, WithClock(clk.now), WithShared(fakeShared{down}, time.Second, func(err error) { got = append(got, err) }))
	p := Principal{Subject: "alice"}
	var allowed []bool
	for range 3 {
		_, r := l.Allow(p, "up", "up__x")
		allowed = append(allowed, r.Allowed)
	}
	if want := []bool{true, true, false}; !equalBools(allowed, want) {
		t.Errorf("with Redis down: allowed %v, want %v (the local bucket, burst 2)", allowed, want)
	}
	if len(got) != 3 || !errors.Is(got[0], down) {
		t.Errorf("fallbacks reported %v, want 3 with the error", got)
	}
}

func equalBools(a, b []bool) bool {
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
