package core

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/testwait"
)

// The hold clock tells each call once its hold passed, and arms its one
// timer once for many holds of one length rather than once per call.
func TestHoldClock(t *testing.T) {
	var k holdClock
	defer k.stop()
	const n = 200
	pumps := make([]*pump, n)
	for i := range pumps {
		pumps[i] = &pump{ended: true} // an ended pump only notes the hold
		k.add(pumps[i], 30*time.Millisecond)
	}
	k.mu.Lock()
	arms := k.arms
	k.mu.Unlock()
	if arms > 2 {
		t.Errorf("the timer was armed %d times for %d holds of one length, want 1", arms, n)
	}
	// Calls that come one after another, as at concurrency 1: one firing
	// serves the holds due within a quarter of a hold of the first.
	var steady holdClock
	defer steady.stop()
	var spaced []*pump
	for range 40 {
		p := &pump{ended: true}
		spaced = append(spaced, p)
		steady.add(p, 40*time.Millisecond)
		time.Sleep(time.Millisecond) // the behaviour under test: calls one after another
	}
	testwait.Until(t, "every spaced hold to pass", func() bool {
		return !slices.ContainsFunc(spaced, func(p *pump) bool { return !p.held.Load() })
	})
	steady.mu.Lock()
	arms = steady.arms
	steady.mu.Unlock()
	if arms > 8 {
		t.Errorf("the timer was armed %d times for 40 holds of 40 ms, one started each millisecond; want a few", arms)
	}
	testwait.Until(t, "every hold to pass", func() bool {
		return !slices.ContainsFunc(pumps, func(p *pump) bool { return !p.held.Load() })
	})
	k.mu.Lock()
	left := len(k.q)
	k.mu.Unlock()
	if left != 0 {
		t.Errorf("%d entries left after every hold passed", left)
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
