package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// holdClock tells running calls that their hold has passed, on one timer
// for all of them. A timer per call was armed and stopped on every call;
// being the process's earliest timer, each could wake the thread blocked
// in the network poller to re-arm its wait. Here a hold may pass up to a
// quarter of its length late, so that one firing serves every hold due in
// that slack: the timer fires at most about four times per hold period
// however many calls run (a hold is when a long call's priming event goes
// out; a few milliseconds either way change nothing for the client).
//
// A call that ends before its hold is not removed: its entry stays until
// its deadline and is then passed over (its pump has ended). The heap
// therefore holds the calls started in the last hold period, and no more.
type holdClock struct {
	// now and afterFunc are the clock (nil: time.Now, time.AfterFunc);
	// tests set them to move time themselves.
	now       func() time.Time
	afterFunc func(time.Duration, func()) holdTimer

	mu    sync.Mutex
	q     holdQueue
	timer holdTimer    // nil until the first hold
	armed time.Time    // when timer fires; zero: not armed
	arms  int          // times the timer was armed (tests)
	told  atomic.Int64 // holders told their hold passed (tests wait on it)
}

// holdTimer is the part of *time.Timer the clock uses.
type holdTimer interface {
	Reset(time.Duration) bool
	Stop() bool
}

func (k *holdClock) clock() time.Time {
	if k.now != nil {
		return k.now()
	}
	return time.Now()
}

type holdEntry struct {
	at, late time.Time // the hold passes at at, and is told by late
	h        holder
}

// holder is told its hold passed: a served call's pump, or a waker.
type holder interface{ holdPassed() }

// waker is a holder that is a channel (buffered 1): After.
type waker chan struct{}

func (w waker) holdPassed() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// holdQueue is a min-heap by late. (container/heap would box every entry
// in an interface: an allocation per call.)
type holdQueue []holdEntry

func (q *holdQueue) push(e holdEntry) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h[i].late.Before(h[up].late) {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
}

func (q *holdQueue) pop() holdEntry {
	h := *q
	e := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = holdEntry{} // no reference kept to a passed call
	h = h[:last]
	for i := 0; ; {
		l, r, least := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].late.Before(h[least].late) {
			least = l
		}
		if r < len(h) && h[r].late.Before(h[least].late) {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	*q = h
	return e
}

// add calls h.holdPassed once d has passed.
func (k *holdClock) add(h holder, d time.Duration) {
	at := k.clock().Add(d)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.q.push(holdEntry{at: at, late: at.Add(d / 4), h: h})
	k.armLocked()
}

// armLocked arms the timer for the earliest entry, if it is not already.
func (k *holdClock) armLocked() {
	if len(k.q) == 0 {
		return
	}
	first := k.q[0].late
	if !k.armed.IsZero() && !first.Before(k.armed) {
		return // armed in time for this entry
	}
	d := first.Sub(k.clock())
	switch {
	case k.timer != nil:
		k.timer.Reset(d)
	case k.afterFunc != nil:
		k.timer = k.afterFunc(d, k.fire)
	default:
		k.timer = time.AfterFunc(d, k.fire)
	}
	k.armed = first
	k.arms++
}

// fire tells every call whose hold has passed (not only the one it was
// armed for), then re-arms.
func (k *holdClock) fire() {
	var due []holder
	k.mu.Lock()
	now := k.clock()
	for len(k.q) > 0 && !k.q[0].at.After(now) {
		due = append(due, k.q.pop().h)
	}
	k.armed = time.Time{}
	k.armLocked()
	k.mu.Unlock()
	for _, h := range due {
		h.holdPassed() // a pump that has ended does nothing
	}
	k.told.Add(int64(len(due)))
}

// After returns a channel that receives once d has passed (up to a
// quarter of d late), on the core's one hold timer: for a delay most calls
// end before, without a timer of their own armed and stopped per call.
func (c *Core) After(d time.Duration) <-chan struct{} {
	w := make(waker, 1)
	c.holds.add(w, d)
	return w
}

// stop stops the timer (the core's Close); pending holds are dropped.
func (k *holdClock) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.timer != nil {
		k.timer.Stop()
	}
	k.q, k.armed = nil, time.Time{}
}
