package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Serve answers msg for sess on the caller's goroutine, for a caller that
// needs nothing back before the answer but the call's stream. Most calls
// send nothing before their answer, and running each on a goroutine of
// the core's, its answer handed back, was two wakeups per call and about
// 7% of the gateway's CPU per small call (http legacy c=32, A/B).
//
// What the upstream sends during the call (progress, log messages,
// server→client requests) goes to out from a pump: a goroutine the core
// owns, started by the first such message, or once hold has passed (hold
// > 0), when it first calls out.HoldPassed. out is never called from two
// goroutines at once, nor after Serve returns; a client too slow to read
// its stream holds up the pump, never the upstream's reader (hints queue
// and are dropped past the stream's bound of 64 messages or
// sessions.queue_bytes). v is as for Handle.
func (c *Core) Serve(ctx context.Context, sess *Session, msg *jsonrpc.Message, v *Verdict, out Stream, hold time.Duration) *jsonrpc.Message {
	c.goMu.Lock()
	if c.closed {
		c.goMu.Unlock()
		return shuttingDown(msg.ID)
	}
	c.wg.Add(1) // Close waits for the call as for the core's own goroutines
	c.goMu.Unlock()
	defer c.wg.Done()

	s := &served{}
	s.stream = CallStream{ctx: ctx, sess: sess, pump: &s.pump} // no events queue: the pump makes one if the call sends anything
	p := &s.pump
	p.core, p.sess, p.out = c, sess, out
	if hold > 0 {
		_, p.quiet = out.(QuietHold)
		c.holds.add(p, hold) // holdclock.go; one that passes after the answer finds the pump ended
	}
	resp := c.Handle(ctx, sess, msg, v, &s.stream)
	if q := p.finish(); q != nil {
		for len(q) > 0 { // what came after the pump stopped, before the answer
			b := <-q
			c.ReleaseQueued(sess, len(b))
			out.Emit(b)
		}
	}
	return resp
}

// Stream is where Serve writes a call's stream.
type Stream interface {
	// Emit writes one message the upstream sent during the call.
	Emit(msg []byte)
	// HoldPassed says the call outlasted Serve's hold; what is emitted
	// after it comes after this call.
	HoldPassed()
}

// QuietHold is a Stream whose hold matters only once the call has emitted
// something (QuietHold itself is a marker and is never called): when the
// hold passes before the first message, no pump starts for it, and
// HoldPassed comes just before that message instead, if one comes. Under
// load, queueing alone pushes small calls past their hold, and a pump
// started for nothing was a goroutine and two wakeups each.
type QuietHold interface {
	Stream
	QuietHold()
}

// EmitFunc is a Stream that only emits (a Serve without a hold).
type EmitFunc func(msg []byte)

func (f EmitFunc) Emit(msg []byte) { f(msg) }
func (EmitFunc) HoldPassed()       {}

// served is one call Serve runs: its stream and pump in one allocation.
type served struct {
	stream CallStream
	pump   pump
}

// pump writes a served call's stream while the call runs on its caller's
// goroutine; it runs only from the first message or the hold's end to
// the answer.
type pump struct {
	core *Core
	sess *Session // charged for what waits in events (queuebytes.go)
	out  Stream

	held  atomic.Bool   // the hold passed: out.HoldPassed is due
	quiet bool          // out is a QuietHold: its hold alone starts nothing
	wake  chan struct{} // buffered 1: the hold passed while the pump waited

	mu      sync.Mutex
	events  chan []byte // the call's queue, made by the first message (queue)
	running bool
	ended   bool          // finish ran: nothing starts any more
	quit    chan struct{} // closed by finish
	done    chan struct{} // closed when the pump's goroutine returns
}

// queue is the call's event queue, made on first use.
func (p *pump) queue() chan []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.events == nil {
		p.events = make(chan []byte, eventQueue)
	}
	return p.events
}

// kick starts the pump if it is not running (a message was queued).
func (p *pump) kick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running || p.ended {
		return
	}
	p.running = true
	if p.events == nil { // started by the hold, before any message: run reads this one
		p.events = make(chan []byte, eventQueue)
	}
	p.quit, p.done, p.wake = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	if !p.core.Go(p.run) {
		// Close has begun: nothing pumps; the caller writes what is queued
		// after the answer comes.
		p.running = false
	}
}

// over reports whether finish ran: the call is answered.
func (p *pump) over() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// holdPassed runs when the hold has passed (holdClock), perhaps after the
// answer: then the pump has ended and it does nothing.
func (p *pump) holdPassed() {
	p.held.Store(true) // before the look at events: a message queued after it finds held set
	if p.quiet {
		p.mu.Lock()
		idle := !p.running && p.events == nil
		p.mu.Unlock()
		if idle {
			return // the first message's kick starts the pump, which calls HoldPassed first
		}
	}
	p.kick()
	p.mu.Lock()
	if p.running {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

func (p *pump) run() {
	defer close(p.done)
	heldDone := false
	for {
		if !heldDone && p.held.Load() {
			heldDone = true
			p.out.HoldPassed()
		}
		select {
		case b := <-p.events:
			p.core.ReleaseQueued(p.sess, len(b))
			p.out.Emit(b)
		case <-p.wake:
		case <-p.quit:
			return
		}
	}
}

// finish stops the pump for good and waits for its goroutine: from its
// return the caller alone writes the stream. It returns the call's queue
// (nil if nothing was ever queued).
func (p *pump) finish() chan []byte {
	p.mu.Lock()
	p.ended = true
	running, q := p.running, p.events
	p.mu.Unlock()
	if running {
		close(p.quit)
		<-p.done
	}
	return q
}
