package policy

import (
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestLimiter(t *testing.T, yaml string) (*Limiter, *fakeClock) {
	t.Helper()
	cfg := parseConfig(t, "policy:\n  default: allow\n  rate_limits:\n"+yaml)
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	return NewLimiter(cfg.Policy.RateLimits, WithClock(clk.now)), clk
}

func TestLimiterPrincipal(t *testing.T) {
	l, clk := newTestLimiter(t, `
    principal: {rate: 2/s, burst: 3}
`)
	alice, bob := Principal{Subject: "alice"}, Principal{Subject: "bob"}
	for i := range 3 {
		if _, r := l.Allow(alice, "github", "github__x"); !r.Allowed {
			t.Fatalf("call %d refused: %v", i, r)
		}
	}
	_, r := l.Allow(alice, "github", "github__x")
	if r.Allowed || r.Limit != "principal" || r.RetryAfter != 500*time.Millisecond || r.RetryAfterSeconds() != 1 {
		t.Fatalf("4th call: %+v", r)
	}
	if r.String() != "rate limited by principal; retry after 1s" {
		t.Errorf("String() = %q", r.String())
	}
	// Another principal has its own bucket.
	if _, r := l.Allow(bob, "github", "github__x"); !r.Allowed {
		t.Fatalf("bob refused: %v", r)
	}
	// A refused call spends nothing: after exactly the hint, one call fits.
	clk.advance(r.RetryAfter)
	if _, r := l.Allow(alice, "github", "github__x"); !r.Allowed {
		t.Fatalf("after the hint: %+v", r)
	}
	if _, r := l.Allow(alice, "github", "github__x"); r.Allowed {
		t.Fatal("bucket should be empty again")
	}
}

func TestLimiterToolsAndUpstreams(t *testing.T) {
	l, clk := newTestLimiter(t, `
    tools:
      - {tool: "github__create_*", rate: 1/m, burst: 1}
      - {tool: "github__*", rate: 60/m, burst: 2, per_principal: true}
    upstreams:
      github: {rate: 10/s, burst: 4}
`)
	alice, bob := Principal{Subject: "alice"}, Principal{Subject: "bob"}
	// Shared tool bucket: one create per minute across principals.
	if _, r := l.Allow(alice, "github", "github__create_issue"); !r.Allowed {
		t.Fatal(r)
	}
	_, r := l.Allow(bob, "github", "github__create_issue")
	if r.Allowed || r.Limit != "tool github__create_*" || r.RetryAfter != time.Minute {
		t.Fatalf("bob's create: %+v", r)
	}
	// Buckets are per tool name: another create tool has its own.
	if _, r := l.Allow(bob, "github", "github__create_pr"); !r.Allowed {
		t.Fatal(r)
	}
	// Per-principal tool bucket (first matching entry only).
	if _, r := l.Allow(alice, "github", "github__get"); !r.Allowed {
		t.Fatal(r)
	}
	// The upstream bucket (burst 4) is now empty: alice 2 + bob 1 taken
	// (bob's refused call gave its token back), +1 here.
	if _, r := l.Allow(bob, "github", "github__get"); !r.Allowed {
		t.Fatal(r)
	}
	_, r = l.Allow(alice, "github", "github__get")
	if r.Allowed || r.Limit != "upstream github" || r.RetryAfter != 100*time.Millisecond {
		t.Fatalf("upstream: %+v", r)
	}
	// The refusal returned alice's per-tool token: after the upstream
	// refills she still has one get left in her burst of 2.
	clk.advance(100 * time.Millisecond)
	if _, r := l.Allow(alice, "github", "github__get"); !r.Allowed {
		t.Fatalf("after refill: %+v", r)
	}
	// Non-tool requests skip tool buckets; other upstreams are unlimited.
	for range 10 {
		if _, r := l.Allow(alice, "fs", "fs__x"); !r.Allowed {
			t.Fatal(r)
		}
	}
}

func TestLimiterConcurrency(t *testing.T) {
	l, _ := newTestLimiter(t, `
    upstreams:
      fs: {max_concurrent: 2}
`)
	p := Principal{}
	rel1, r1 := l.Allow(p, "fs", "")
	rel2, r2 := l.Allow(p, "fs", "")
	if !r1.Allowed || !r2.Allowed {
		t.Fatal(r1, r2)
	}
	_, r := l.Allow(p, "fs", "")
	if r.Allowed || r.Limit != "upstream fs concurrency" || r.RetryAfter != ConcurrencyRetryAfter {
		t.Fatalf("third: %+v", r)
	}
	rel1()
	rel1() // idempotent: must not free a second slot
	if _, r := l.Allow(p, "fs", ""); !r.Allowed {
		t.Fatal(r)
	}
	if _, r := l.Allow(p, "fs", ""); r.Allowed {
		t.Fatal("a double release freed two slots")
	}
	rel2()
}

func TestLimiterConcurrencyRefusedByBucketFreesSlot(t *testing.T) {
	l, _ := newTestLimiter(t, `
    principal: {rate: 1/h, burst: 1}
    upstreams:
      fs: {max_concurrent: 1}
`)
	p := Principal{Subject: "a"}
	rel, r := l.Allow(p, "fs", "")
	if !r.Allowed {
		t.Fatal(r)
	}
	rel()
	if _, r := l.Allow(p, "fs", ""); r.Allowed || r.Limit != "principal" {
		t.Fatalf("%+v", r)
	}
	// The slot taken by the refused call was given back.
	if _, r := l.Allow(Principal{Subject: "b"}, "fs", ""); !r.Allowed {
		t.Fatalf("slot leaked: %+v", r)
	}
}

func TestLimiterEviction(t *testing.T) {
	l, clk := newTestLimiter(t, `
    principal: {rate: 1/s, burst: 5}
    idle_timeout: 1m
    max_buckets: 3
`)
	for _, s := range []string{"a", "b", "c", "d"} {
		l.Allow(Principal{Subject: s}, "fs", "")
	}
	if n := l.Buckets(); n != 3 {
		t.Errorf("Buckets() = %d, want max_buckets 3", n)
	}
	clk.advance(59 * time.Second)
	l.Allow(Principal{Subject: "d"}, "fs", "")
	if n := l.Buckets(); n != 3 {
		t.Errorf("before idle_timeout: %d buckets", n)
	}
	clk.advance(2 * time.Second)
	l.Allow(Principal{Subject: "d"}, "fs", "")
	if n := l.Buckets(); n != 1 {
		t.Errorf("after idle_timeout: %d buckets, want 1 (d)", n)
	}
}

func TestLimiterEvictionWaitsForRefill(t *testing.T) {
	// A bucket that takes an hour to refill outlives a 1m idle_timeout, so
	// forgetting it cannot hand out a fresh burst early.
	l, clk := newTestLimiter(t, `
    principal: {rate: 1/h, burst: 1}
    idle_timeout: 1m
`)
	a := Principal{Subject: "a"}
	l.Allow(a, "fs", "")
	clk.advance(10 * time.Minute)
	l.Allow(Principal{Subject: "b"}, "fs", "")
	if _, r := l.Allow(a, "fs", ""); r.Allowed {
		t.Fatal("eviction reset a bucket that had not refilled")
	}
}

func TestNilLimiter(t *testing.T) {
	var l *Limiter
	rel, r := l.Allow(Principal{}, "x", "y")
	if !r.Allowed || rel == nil || l.Buckets() != 0 {
		t.Fatal(r)
	}
	rel()
	if NewLimiter(nil) != nil {
		t.Error("NewLimiter(nil) != nil")
	}
}

func TestLimiterConcurrentUse(t *testing.T) {
	// Under -race: many goroutines on shared and per-principal buckets.
	// With a frozen clock exactly burst calls succeed.
	l, _ := newTestLimiter(t, `
    principal: {rate: 1/h, burst: 50}
    upstreams:
      github: {rate: 1/h, burst: 100, max_concurrent: 1000}
`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := Principal{Subject: []string{"a", "b", "c", "d"}[g%4]}
			for range 40 {
				rel, r := l.Allow(p, "github", "github__x")
				rel()
				if r.Allowed {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if ok != 100 {
		t.Errorf("%d calls allowed, want the upstream burst of 100", ok)
	}
}
