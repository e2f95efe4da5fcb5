package core

import (
	"container/heap"
	"sync"
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
	mu    sync.Mutex
	q     holdQueue
	timer *time.Timer // nil until the first hold
	armed time.Time   // when timer fires; zero: not armed
	arms  int         // times the timer was armed (tests)
}

type holdEntry struct {
	at, late time.Time // the hold passes at at, and is told by late
	p        *pump
}

type holdQueue []holdEntry

func (q holdQueue) Len() int           { return len(q) }
func (q holdQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q holdQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *holdQueue) Push(x any)        { *q = append(*q, x.(holdEntry)) }
func (q *holdQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = holdEntry{} // no reference kept to a passed call
	*q = old[:len(old)-1]
	return e
}

// add calls p.holdPassed once d has passed (unless p has ended by then).
func (k *holdClock) add(p *pump, d time.Duration) {
	at := time.Now().Add(d)
	k.mu.Lock()
	defer k.mu.Unlock()
	heap.Push(&k.q, holdEntry{at: at, late: at.Add(d / 4), p: p})
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
	d := first.Sub(time.Now())
	if k.timer == nil {
		k.timer = time.AfterFunc(d, k.fire)
	} else {
		k.timer.Reset(d)
	}
	k.armed = first
	k.arms++
}

// fire tells every call whose hold has passed (not only the one it was
// armed for), then re-arms.
func (k *holdClock) fire() {
	var due []*pump
	k.mu.Lock()
	now := time.Now()
	for len(k.q) > 0 && !k.q[0].at.After(now) {
		due = append(due, heap.Pop(&k.q).(holdEntry).p)
	}
	k.armed = time.Time{}
	k.armLocked()
	k.mu.Unlock()
	for _, p := range due {
		p.holdPassed() // one that has ended does nothing
	}
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
