package policy

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy/pattern"
)

// ConcurrencyRetryAfter is the retry hint for a call refused by a full
// per-upstream concurrency cap: when a slot frees is unknowable, so the
// hint is short.
const ConcurrencyRetryAfter = time.Second

// Limiter enforces policy.rate_limits: token buckets per principal, per
// tool (shared or per principal) and per upstream, and a cap on the calls
// in flight per upstream. It is safe for concurrent use. Unlike Policy it
// holds state, so on a config reload keep the old Limiter when
// rate_limits did not change (reflect.DeepEqual), or buckets start full.
//
// A nil *Limiter allows everything.
type Limiter struct {
	now       func() time.Time
	principal *bucketSpec
	tools     []toolLimit
	upstreams map[string]*upstreamLimit

	idle time.Duration
	max  int

	// shared, when set, are the fleet's buckets (sharedlimit.go).
	shared        SharedBuckets
	sharedTimeout time.Duration
	fallback      func(error)

	// reserve makes one call's reservations on all its buckets, and
	// their cancellation when one refuses, a single step: a refund is
	// whole only while no other reservation came after it (x/time/rate),
	// so calls interleaving there lost tokens they had given back.
	reserve sync.Mutex

	mu      sync.Mutex
	lru     *list.List // of *entry, most recently used first
	entries map[string]*list.Element
}

type bucketSpec struct {
	limit rate.Limit
	burst int
	// full is how long an empty bucket takes to refill.
	full time.Duration
}

type toolLimit struct {
	glob         pattern.Glob
	text         string
	spec         bucketSpec
	perPrincipal bool
}

type upstreamLimit struct {
	bucket *rate.Limiter // nil: no rate
	spec   bucketSpec
	slots  chan struct{} // nil: no cap
}

type entry struct {
	key    string
	lim    *rate.Limiter
	last   time.Time
	expiry time.Duration // idle time after which the entry may go
}

func newSpec(r config.Rate, burst int) bucketSpec {
	if burst < 1 {
		burst = config.DefaultBurst(r)
	}
	ps := r.PerSecond()
	return bucketSpec{limit: rate.Limit(ps), burst: burst, full: time.Duration(float64(burst) / ps * float64(time.Second))}
}

// LimiterOption configures NewLimiter.
type LimiterOption func(*Limiter)

// WithClock sets the clock (for tests).
func WithClock(now func() time.Time) LimiterOption { return func(l *Limiter) { l.now = now } }

// NewLimiter builds a Limiter from policy.rate_limits, as config.Parse
// validated and defaulted it. A nil section gives a nil Limiter.
func NewLimiter(rl *config.RateLimits, opts ...LimiterOption) *Limiter {
	if rl == nil {
		return nil
	}
	l := &Limiter{
		now:       time.Now,
		upstreams: map[string]*upstreamLimit{},
		idle:      rl.IdleTimeout.D(),
		max:       rl.MaxBuckets,
		lru:       list.New(),
		entries:   map[string]*list.Element{},
	}
	if l.idle <= 0 {
		l.idle = config.DefaultRateLimitIdle
	}
	if l.max < 1 {
		l.max = config.DefaultMaxBuckets
	}
	for _, o := range opts {
		o(l)
	}
	if b := rl.Principal; b != nil && !b.Rate.IsZero() {
		s := newSpec(b.Rate, b.Burst)
		l.principal = &s
	}
	for _, t := range rl.Tools {
		if t == nil || t.Rate.IsZero() {
			continue
		}
		g, err := pattern.Compile(t.Tool)
		if err != nil {
			continue // validation reports it; Glob{} would match nothing anyway
		}
		l.tools = append(l.tools, toolLimit{glob: g, text: t.Tool, spec: newSpec(t.Rate, t.Burst), perPrincipal: t.PerPrincipal})
	}
	for name, u := range rl.Upstreams {
		if u == nil {
			continue
		}
		ul := &upstreamLimit{}
		if !u.Rate.IsZero() {
			s := newSpec(u.Rate, u.Burst)
			ul.bucket, ul.spec = rate.NewLimiter(s.limit, s.burst), s
		}
		if u.MaxConcurrent > 0 {
			ul.slots = make(chan struct{}, u.MaxConcurrent)
		}
		l.upstreams[name] = ul
	}
	return l
}

// Limited is the outcome of Limiter.Allow.
type Limited struct {
	// Allowed reports whether the call may go ahead.
	Allowed bool
	// Limit names what refused it, for errors and metric labels:
	// "principal", "tool <glob>", "upstream <name>" or
	// "upstream <name> concurrency".
	Limit string
	// RetryAfter is when trying again can succeed (from now).
	RetryAfter time.Duration
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1,
// for a Retry-After header or a JSON-RPC error's data.
func (r Limited) RetryAfterSeconds() int {
	s := int((r.RetryAfter + time.Second - 1) / time.Second)
	return max(1, s)
}

// String describes a refusal.
func (r Limited) String() string {
	if r.Allowed {
		return "allowed"
	}
	return fmt.Sprintf("rate limited by %s; retry after %ss", r.Limit, strconv.Itoa(r.RetryAfterSeconds()))
}

// Allow takes one token from every bucket that applies to a call by p to
// tool (a namespaced tool name; "" for requests that are not tool calls,
// which skip the tool buckets) on upstream, and a concurrency slot. Either
// every bucket gives a token or none is spent. When Allowed, call release
// once the upstream has answered (or the call was abandoned); release is
// idempotent and never nil.
func (l *Limiter) Allow(p Principal, upstream, tool string) (release func(), res Limited) {
	noop := func() {}
	if l == nil {
		return noop, Limited{Allowed: true}
	}
	now := l.now()
	ul := l.upstreams[upstream]
	release = noop
	if ul != nil && ul.slots != nil {
		select {
		case ul.slots <- struct{}{}:
			var done atomic.Bool
			release = func() {
				if done.CompareAndSwap(false, true) {
					<-ul.slots
				}
			}
		default:
			return noop, Limited{Limit: "upstream " + upstream + " concurrency", RetryAfter: ConcurrencyRetryAfter}
		}
	}

	// The buckets that apply, by key (the shared buckets' names too).
	type named struct {
		key  string
		spec bucketSpec
		lim  *rate.Limiter // the upstream's own bucket; others by key
		name string
	}
	var buckets [3]named
	n := 0
	pk := p.Key()
	if l.principal != nil {
		buckets[n] = named{key: "p\x00" + pk, spec: *l.principal, name: "principal"}
		n++
	}
	if tool != "" {
		for i, t := range l.tools {
			if !t.glob.Match(tool) {
				continue
			}
			key := "t\x00" + strconv.Itoa(i) + "\x00" + tool
			if t.perPrincipal {
				key += "\x00" + pk
			}
			buckets[n] = named{key: key, spec: t.spec, name: "tool " + t.text}
			n++
			break // the first matching entry applies
		}
	}
	if ul != nil && ul.bucket != nil {
		buckets[n] = named{key: "u\x00" + upstream, spec: ul.spec, lim: ul.bucket, name: "upstream " + upstream}
		n++
	}
	if n == 0 {
		return release, Limited{Allowed: true}
	}

	if l.shared != nil {
		var sb [3]SharedBucket
		for i := range n {
			sb[i] = SharedBucket{Key: buckets[i].key, Interval: time.Duration(float64(time.Second) / float64(buckets[i].spec.limit)), Burst: buckets[i].spec.burst}
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.sharedTimeout)
		ok, refused, retry, err := l.shared.Take(ctx, sb[:n])
		cancel()
		if err == nil {
			if ok {
				return release, Limited{Allowed: true}
			}
			release()
			return noop, Limited{Limit: buckets[refused].name, RetryAfter: retry}
		}
		if l.fallback != nil {
			l.fallback(err) // decided below with this replica's own buckets
		}
	}
	for i := range n {
		if buckets[i].lim == nil {
			buckets[i].lim = l.bucket(buckets[i].key, buckets[i].spec, now)
		}
	}

	var rs [3]*rate.Reservation
	l.reserve.Lock()
	defer l.reserve.Unlock()
	for i := range n {
		rs[i] = buckets[i].lim.ReserveN(now, 1)
		d := rs[i].DelayFrom(now)
		if refused := !rs[i].OK() || d > 0; refused && (res.Limit == "" || d > res.RetryAfter) {
			res.Limit, res.RetryAfter = buckets[i].name, d
		}
	}
	if res.Limit == "" {
		return release, Limited{Allowed: true}
	}
	// Refused: give back every token taken, including the one reserved
	// in the future from the bucket that refused.
	for i := n - 1; i >= 0; i-- {
		rs[i].CancelAt(now)
	}
	release()
	return noop, res
}

// bucket returns the LRU-tracked bucket for key, creating it full.
func (l *Limiter) bucket(key string, spec bucketSpec, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evict(now)
	if el, ok := l.entries[key]; ok {
		e := el.Value.(*entry)
		e.last = now
		l.lru.MoveToFront(el)
		return e.lim
	}
	e := &entry{key: key, lim: rate.NewLimiter(spec.limit, spec.burst), last: now, expiry: max(l.idle, spec.full)}
	l.entries[key] = l.lru.PushFront(e)
	for l.lru.Len() > l.max {
		l.remove(l.lru.Back())
	}
	return e.lim
}

// evict drops entries idle past their expiry, oldest first. An entry's
// expiry is at least its refill time, so a dropped bucket was full and
// recreating it full grants nothing extra.
func (l *Limiter) evict(now time.Time) {
	for el := l.lru.Back(); el != nil; el = l.lru.Back() {
		e := el.Value.(*entry)
		if now.Sub(e.last) < e.expiry {
			// Entries are in last-use order, but expiries differ; an entry
			// further forward with a shorter expiry waits for this one.
			return
		}
		l.remove(el)
	}
}

func (l *Limiter) remove(el *list.Element) {
	delete(l.entries, el.Value.(*entry).key)
	l.lru.Remove(el)
}

// Buckets returns how many per-principal and per-tool buckets are tracked.
func (l *Limiter) Buckets() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
