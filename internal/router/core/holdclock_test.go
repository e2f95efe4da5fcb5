package core

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/testwait"
)

// fakeHoldTime is a clock and its timers for a holdClock, moved by the
// test: a loaded machine cannot stretch the time between two holds.
type fakeHoldTime struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeHoldTimer
}

type fakeHoldTimer struct {
	c      *fakeHoldTime
	at     time.Time
	f      func()
	active bool
}

func newFakeHoldTime() *fakeHoldTime { return &fakeHoldTime{now: time.Now()} }

// on makes k run on c.
func (c *fakeHoldTime) on(k *holdClock) {
	k.now = c.Now
	k.afterFunc = func(d time.Duration, f func()) holdTimer {
		c.mu.Lock()
		defer c.mu.Unlock()
		t := &fakeHoldTimer{c: c, at: c.now.Add(d), f: f, active: true}
		c.timers = append(c.timers, t)
		return t
	}
}

func (c *fakeHoldTime) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// advance moves the clock by d and runs the timers due, as AfterFunc does.
func (c *fakeHoldTime) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if t.active && !t.at.After(c.now) {
			t.active = false
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

func (t *fakeHoldTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.at, t.active = t.c.now.Add(d), true
	return was
}

func (t *fakeHoldTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func heldAll(pumps []*pump) bool {
	return !slices.ContainsFunc(pumps, func(p *pump) bool { return !p.held.Load() })
}

// The hold clock tells each call once its hold passed, and arms its one
// timer once for many holds of one length rather than once per call.
func TestHoldClock(t *testing.T) {
	clock := newFakeHoldTime()
	var k holdClock
	clock.on(&k)
	defer k.stop()
	const n = 200
	pumps := make([]*pump, n)
	for i := range pumps {
		pumps[i] = &pump{ended: true} // an ended pump only notes the hold
		k.add(pumps[i], 30*time.Millisecond)
	}
	if k.arms != 1 {
		t.Errorf("the timer was armed %d times for %d holds of one length, want 1", k.arms, n)
	}
	clock.advance(37 * time.Millisecond)
	if slices.ContainsFunc(pumps, func(p *pump) bool { return p.held.Load() }) {
		t.Error("a hold was told before a quarter of a hold after its time")
	}
	clock.advance(time.Millisecond) // 38 ms: at most a quarter of the hold late
	if !heldAll(pumps) {
		t.Error("not every hold was told within a quarter of a hold of its time")
	}
	if left := len(k.q); left != 0 {
		t.Errorf("%d entries left after every hold passed", left)
	}

	// Calls that come one after another, as at concurrency 1: one firing
	// serves the holds due within a quarter of a hold of the first.
	steadyClock := newFakeHoldTime()
	var steady holdClock
	steadyClock.on(&steady)
	defer steady.stop()
	var spaced []*pump
	for range 40 {
		p := &pump{ended: true}
		spaced = append(spaced, p)
		steady.add(p, 40*time.Millisecond)
		steadyClock.advance(time.Millisecond) // calls one after another
	}
	steadyClock.advance(50 * time.Millisecond)
	if !heldAll(spaced) {
		t.Error("a spaced hold was not told within a quarter of a hold of its time")
	}
	if arms := steady.arms; arms > 8 {
		t.Errorf("the timer was armed %d times for 40 holds of 40 ms, one started each millisecond; want a few", arms)
	}
}

// After receives once its delay has passed, not before.
func TestAfter(t *testing.T) {
	f := newFixture(t, false)
	start := time.Now()
	select {
	case <-f.core.After(30 * time.Millisecond):
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Errorf("After(30ms) received after %s", d)
		}
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		t.Fatal("After(30ms) never received")
	}
}

// The queue pops by late, earliest first, whatever order it was filled in.
func TestHoldQueue(t *testing.T) {
	var q holdQueue
	base := time.Now()
	for _, i := range rand.Perm(100) {
		q.push(holdEntry{late: base.Add(time.Duration(i) * time.Millisecond)})
	}
	for want := range 100 {
		if got := q.pop().late.Sub(base); got != time.Duration(want)*time.Millisecond {
			t.Fatalf("pop %d gave %s", want, got)
		}
	}
	if len(q) != 0 {
		t.Errorf("%d left", len(q))
	}
}
