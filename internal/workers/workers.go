// Package workers runs short tasks — one per call, such as reading an
// upstream's answer stream or dispatching a routed request — on goroutines
// kept between tasks.
//
// A fresh goroutine starts with a small stack and grows it by copying as
// the task goes deep (an HTTP round trip, a JSON check, a policy
// decision): a tenth of the gateway's CPU per small call was
// runtime.copystack (issue 18). A goroutine kept from the last task keeps
// the stack it grew. The pool owns its goroutines: at most maxIdle wait
// for work, one idle for longer than idleFor ends, and Close ends the
// idle ones and waits for those still running a task.
package workers

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pool hands tasks to idle goroutines, starting one when none is idle.
type Pool struct {
	maxIdle int
	idleFor time.Duration

	mu     sync.Mutex
	idle   []*worker // last parked last: its stack is the warmest; the front has waited longest
	gen    uint64    // trim rounds so far: a worker parked before the last round has waited ≥ idleFor
	timer  *time.Timer
	closed bool
	wg     sync.WaitGroup

	started atomic.Int64
	tasks   atomic.Int64
}

type worker struct {
	tasks chan func() // one task at a time; closed to end the worker
	gen   uint64      // p.gen when it parked
}

// New makes a pool keeping at most maxIdle goroutines idle, each for at
// most about idleFor (between idleFor and twice that).
func New(maxIdle int, idleFor time.Duration) *Pool {
	return &Pool{maxIdle: maxIdle, idleFor: idleFor}
}

// Go runs fn on an idle goroutine, or a new one. It reports false, without
// running fn, once Close has begun.
func (p *Pool) Go(fn func()) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.tasks.Add(1)
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.tasks <- fn // buffered: never blocks, the worker is waiting for it
		return true
	}
	p.wg.Add(1) // under mu, before closed can be set: Close's Wait sees it
	p.mu.Unlock()
	p.started.Add(1)
	go p.run(fn)
	return true
}

// Started is how many goroutines the pool has started.
func (p *Pool) Started() int64 { return p.started.Load() }

// Tasks is how many functions the pool has been given to run.
func (p *Pool) Tasks() int64 { return p.tasks.Load() }

// Idle is how many goroutines wait for a task now.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func (p *Pool) run(fn func()) {
	defer p.wg.Done()
	w := &worker{tasks: make(chan func(), 1)}
	for {
		fn()
		fn = nil // nothing of the last task stays reachable while idle
		if !p.park(w) {
			return
		}
		var ok bool
		if fn, ok = <-w.tasks; !ok {
			return
		}
	}
}

// park makes w idle, unless the pool is closed or has idle goroutines
// enough (then w ends).
func (p *Pool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= p.maxIdle {
		return false
	}
	w.gen = p.gen
	p.idle = append(p.idle, w)
	if p.timer == nil {
		p.timer = time.AfterFunc(p.idleFor, p.trim)
	}
	return true
}

// trim ends the workers idle since before the last round; it runs every
// idleFor while any goroutine is idle.
func (p *Pool) trim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	if p.closed {
		return
	}
	n := 0
	for n < len(p.idle) && p.idle[n].gen < p.gen {
		close(p.idle[n].tasks)
		n++
	}
	kept := copy(p.idle, p.idle[n:])
	clear(p.idle[kept:])
	p.idle = p.idle[:kept]
	p.gen++
	if len(p.idle) > 0 {
		p.timer = time.AfterFunc(p.idleFor, p.trim)
	}
}

// Close ends the idle goroutines and waits for the running tasks to end.
// Go runs nothing after it.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	for _, w := range p.idle {
		close(w.tasks)
	}
	p.idle = nil
	p.mu.Unlock()
	p.wg.Wait()
}
