package host

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Interactive calls on stdio and legacy SSE upstreams (issue 30). Their
// wire does not say which call a server→client request (sampling,
// elicitation, roots/list) belongs to, so the client names the only call
// in flight on the connection that could take it, and refuses the request
// when there are several. Refusing is right; refusing most interactive
// calls is not. A call can only be asked if its caller declared sampling
// or elicitation (or roots, with forward_roots): such a call (an asking
// call) gets a connection on which it is the only call in flight, from the
// first call on, so that the owner rule is exact without waiting to see
// whether the upstream asks at all:
//
//   - shared upstream: the shared connection when nothing is in flight
//     there, else one of a pool of at most interactive_pool connections
//     (children, for stdio), made on demand and closed when idle; a call
//     that finds them all busy waits, up to interactiveQueuePerConn per
//     connection (the shared one included), then is refused naming the
//     key;
//   - the session's own connection (stateful: true), a capability view or
//     an acting-for connection: one asking call at a time on it, the
//     others waiting the same way (a second child would not share the
//     session's state).
//
// Calls of callers that declared none of these cannot be asked; they take
// the shared connection untouched, however many are in flight (the fast
// path: a context lookup and a scan of the caller's capabilities). Their
// upstream may still send requests during them (it sees the gateway's
// capabilities, not their caller's): when one overlaps an asking call on
// the shared connection, the owner rule finds two candidates and refuses,
// rather than show one caller's request to another. Sequential calls, and
// those of callers that cannot be asked, stay on the shared connection,
// where a server's process state (subscriptions, toggles) is.

// interactiveIdle is how long a pool connection is kept unused.
const interactiveIdle = 2 * time.Minute

// interactiveQueuePerConn bounds the calls waiting for a connection (of the
// pool or the shared one, or for a session's turn) per connection they
// wait for. A waiting call is its request's goroutine parked on a channel
// (a few KB), and the router already bounds requests per session (128 by
// default): deep enough that a burst from several sessions — 10 clients
// with 50 calls each at once, with the default pool — waits rather than
// fails.
const interactiveQueuePerConn = 128

type interactivePool struct {
	logGate logGate // unattributed refusals' log lines

	mu      sync.Mutex
	idle    []idleConn
	busy    map[*client.Client]bool
	opening int // being dialled (hold a slot)
	waiting int
	// onShared is the shared connection while an asking call runs on it.
	onShared *client.Client
	// wake is closed (and forgotten) when a connection may have come
	// free — an asking call ended, a dial ended, the pool closed — and
	// the waiting calls look again.
	wake chan struct{}
	// dialFailed counts failed dials, dialErr the last one's error: a call
	// waiting when a dial fails gets it rather than wait on.
	dialFailed int
	dialErr    error
	timer      *time.Timer      // reaps idle connections
	now        func() time.Time // nil: time.Now (tests set it)
	closed     bool
	// gates serialize interactive calls on connections that cannot be
	// multiplied (a session's own, a view): by connection.
	gates map[*client.Client]*gate
}

// logGate lets one log line a second through, counting the others (the
// metric counts every one).
type logGate struct {
	last    atomic.Int64 // Unix nanoseconds of the last line let through
	skipped atomic.Int64
}

// allow reports whether a line may be logged at now, and how many were
// not since the last one.
func (g *logGate) allow(now time.Time) (int64, bool) {
	last := g.last.Load()
	if now.UnixNano()-last < int64(time.Second) || !g.last.CompareAndSwap(last, now.UnixNano()) {
		g.skipped.Add(1)
		return 0, false
	}
	return g.skipped.Swap(0), true
}

type idleConn struct {
	c     *client.Client
	since time.Time
}

type gate struct {
	turn    chan struct{} // capacity 1
	waiting int
}

// canBeAsked reports whether the caller of ctx declared a capability that
// lets the upstream ask it something during a call: sampling or
// elicitation, or roots when forward_roots relays roots/list (otherwise
// the gateway answers it from config, whoever the call is). No recorded
// capabilities: it cannot be (core's CallStream refuses its requests).
func (u *Upstream) canBeAsked(ctx context.Context) bool {
	caps, ok := CallerCapabilities(ctx)
	if !ok {
		return false
	}
	has := func(key string) bool {
		v, ok := rawjson.Get(caps, key)
		return ok && string(v) != "null"
	}
	return has("sampling") || has("elicitation") || (u.cfg.ForwardRoots && has("roots"))
}

// Interactive returns the connection a call should use instead of c, the
// one ClientFor chose, and what to call when the call is done (never nil).
// Only a call whose requests are relayed (canAsk) from a caller that
// declared it can be asked (canBeAsked) is placed, and only when the
// method is a call and c cannot attribute requests itself. params with a
// task member stay on c: the task's later requests must find the
// connection that created it.
func (u *Upstream) Interactive(ctx context.Context, c *client.Client, method string, params json.RawMessage, canAsk bool) (*client.Client, func(), error) {
	if !canAsk || u.cfg.InteractivePool <= 0 {
		return c, noRelease, nil
	}
	if !mcp.Method(method).Interactive {
		return c, noRelease, nil
	}
	if c.Attributes() || c.Modern() || !u.canBeAsked(ctx) {
		return c, noRelease, nil
	}
	if _, ok := rawjson.Get(params, "task"); ok {
		return c, noRelease, nil
	}
	u.mu.Lock()
	shared := c == u.client
	u.mu.Unlock()
	if !shared {
		return u.turnOn(ctx, c)
	}
	return u.pooled(ctx, c)
}

func noRelease() {}

// refusal is the error of a call that found the queue full.
func (u *Upstream) interactiveRefusal(what string) error {
	r := &limits.Refusal{Bound: "upstreams." + u.name + ".interactive_pool", Max: u.cfg.InteractivePool, RetryAfter: 1, What: what}
	u.host.opts.Metrics.LimitRefused(r.Bound)
	u.log.Warn("interactive call refused: every connection busy and the queue full", zap.String("bound", r.Bound), zap.String("what", what))
	return r
}

// pooled places one asking call: on shared when no other call is in
// flight there, else on an idle pool connection. While none is free it
// waits, and dials a new one in the background when fewer than
// interactive_pool are open: whichever frees first serves the call, so a
// burst of short calls is not held for a child's start (seconds, for
// some) when the shared connection is free again in milliseconds.
func (u *Upstream) pooled(ctx context.Context, shared *client.Client) (*client.Client, func(), error) {
	p := &u.interactive
	size := u.cfg.InteractivePool
	p.mu.Lock()
	if p.closed || u.ctx.Err() != nil {
		p.mu.Unlock()
		return nil, nil, &UnavailableError{Upstream: u.name, State: StateStopped}
	}
	if p.waiting >= (size+1)*interactiveQueuePerConn {
		p.mu.Unlock()
		return nil, nil, u.interactiveRefusal(fmt.Sprintf("interactive calls waiting for a connection of upstream %q", u.name))
	}
	p.waiting++
	failures := p.dialFailed
	var dead []*client.Client
	defer func() {
		if len(dead) > 0 {
			u.closeLater(dead)
		}
	}()
	for {
		if p.closed {
			p.waiting--
			p.mu.Unlock()
			return nil, nil, &UnavailableError{Upstream: u.name, State: StateStopped}
		}
		// The shared connection is free when no asking call holds it (one
		// that holds an older, replaced one does not count). It is taken
		// when nothing else is in flight on it either: another call there,
		// even one that cannot be asked, would make this call's requests
		// ambiguous (refused). When every pool connection is busy it is
		// taken all the same rather than wait.
		if p.onShared != shared && (len(p.busy) >= size || shared.Pending() == 0) {
			p.onShared = shared
			p.waiting--
			p.mu.Unlock()
			return shared, func() { u.unshare(shared) }, nil
		}
		for len(p.idle) > 0 {
			ic := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			select {
			case <-ic.c.Done():
				dead = append(dead, ic.c)
				continue
			default:
			}
			c := ic.c
			p.markBusyLocked(c)
			p.waiting--
			u.metricPoolLocked()
			p.mu.Unlock()
			return c, func() { u.unpool(c) }, nil
		}
		if p.dialFailed != failures {
			err := p.dialErr
			p.waiting--
			p.mu.Unlock()
			if _, ok := err.(*UnavailableError); ok {
				return nil, nil, err
			}
			return nil, nil, &UnavailableError{Upstream: u.name, State: StateDown, Cause: err}
		}
		dial := len(p.busy)+p.opening < size
		if dial {
			p.opening++
			u.metricPoolLocked()
		}
		if p.wake == nil {
			p.wake = make(chan struct{})
		}
		wake := p.wake
		p.mu.Unlock()
		if dial {
			u.dialPooled()
		}
		select {
		case <-wake:
		case <-ctx.Done():
			p.mu.Lock()
			p.waiting--
			p.mu.Unlock()
			return nil, nil, ctx.Err()
		}
		p.mu.Lock()
	}
}

// wakeLocked lets the waiting calls look again.
func (p *interactivePool) wakeLocked() {
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
}

// dialPooled opens one pool connection in the background (its slot
// counted in opening): it joins the idle ones, for whichever call is
// waiting. Not the caller's context: that call may be served elsewhere
// first, and the connection still serves the next one. Bounded by
// startup_timeout, and ended by the upstream's stop.
func (u *Upstream) dialPooled() {
	h := u.host
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.wg.Add(1)
	}
	h.mu.Unlock()
	if closed {
		u.dialed(nil, &UnavailableError{Upstream: u.name, State: StateStopped})
		return
	}
	go func() {
		defer h.wg.Done()
		u.dialed(u.connectOpts(u.ctx, "legacy", nil))
	}()
}

// dialed takes the result of dialPooled.
func (u *Upstream) dialed(c *client.Client, err error) {
	p := &u.interactive
	p.mu.Lock()
	p.opening--
	keep := err == nil && !p.closed
	switch {
	case err != nil:
		p.dialFailed++
		p.dialErr = err
	case keep:
		p.idle = append(p.idle, idleConn{c: c, since: p.clock()})
		if p.timer == nil {
			p.timer = time.AfterFunc(interactiveIdle, u.reapInteractive)
		}
	}
	u.metricPoolLocked()
	p.wakeLocked()
	p.mu.Unlock()
	switch {
	case err != nil:
		u.log.Warn("could not open an interactive connection", zap.Error(err))
	case !keep:
		u.closeLater([]*client.Client{c})
	default:
		u.log.Debug("opened an interactive connection")
	}
}

func (p *interactivePool) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *interactivePool) markBusyLocked(c *client.Client) {
	if p.busy == nil {
		p.busy = map[*client.Client]bool{}
	}
	p.busy[c] = true
}

func (u *Upstream) metricPoolLocked() {
	p := &u.interactive
	u.m.InteractiveConns(len(p.busy)+p.opening, len(p.idle))
}

// unshare gives the shared connection back after an asking call.
func (u *Upstream) unshare(shared *client.Client) {
	p := &u.interactive
	p.mu.Lock()
	if p.onShared == shared {
		p.onShared = nil
	}
	p.wakeLocked()
	p.mu.Unlock()
}

// unpool gives c back after its call.
func (u *Upstream) unpool(c *client.Client) {
	p := &u.interactive
	p.mu.Lock()
	_, mine := p.busy[c]
	delete(p.busy, c)
	keep := mine && !p.closed
	if keep {
		select {
		case <-c.Done():
			keep = false
		default:
		}
	}
	if keep {
		p.idle = append(p.idle, idleConn{c: c, since: p.clock()})
		if p.timer == nil {
			p.timer = time.AfterFunc(interactiveIdle, u.reapInteractive)
		}
	}
	u.metricPoolLocked()
	p.wakeLocked()
	p.mu.Unlock()
	if mine && !keep {
		u.closeLater([]*client.Client{c})
	}
}

// reapInteractive closes the pool connections idle for interactiveIdle.
func (u *Upstream) reapInteractive() {
	p := &u.interactive
	p.mu.Lock()
	p.timer = nil
	now := p.clock()
	var old []*client.Client
	kept := p.idle[:0]
	for _, ic := range p.idle {
		if now.Sub(ic.since) >= interactiveIdle {
			old = append(old, ic.c)
		} else {
			kept = append(kept, ic)
		}
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	if len(p.idle) > 0 && !p.closed {
		p.timer = time.AfterFunc(interactiveIdle-now.Sub(p.idle[0].since), u.reapInteractive)
	}
	u.metricPoolLocked()
	p.mu.Unlock()
	if len(old) > 0 {
		u.log.Debug("closing idle interactive connections", zap.Int("connections", len(old)))
		u.closeLater(old)
	}
}

// closeInteractive closes the pool for good (the upstream stops): its
// idle connections and those still serving a call.
func (u *Upstream) closeInteractive() []*client.Client {
	p := &u.interactive
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	var all []*client.Client
	for _, ic := range p.idle {
		all = append(all, ic.c)
	}
	for c := range p.busy {
		all = append(all, c)
	}
	p.idle, p.busy, p.gates, p.onShared = nil, nil, nil, nil
	p.wakeLocked() // the waiting calls find it closed
	u.metricPoolLocked()
	return all
}

// turnOn waits for c's one interactive turn: a connection that cannot be
// multiplied serves its interactive calls one at a time.
func (u *Upstream) turnOn(ctx context.Context, c *client.Client) (*client.Client, func(), error) {
	p := &u.interactive
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, &UnavailableError{Upstream: u.name, State: StateStopped}
	}
	g := p.gates[c]
	if g == nil {
		if p.gates == nil {
			p.gates = map[*client.Client]*gate{}
		}
		for other := range p.gates { // a session's connection ends with it
			select {
			case <-other.Done():
				delete(p.gates, other)
			default:
			}
		}
		g = &gate{turn: make(chan struct{}, 1)}
		p.gates[c] = g
	}
	if g.waiting >= interactiveQueuePerConn {
		p.mu.Unlock()
		return nil, nil, u.interactiveRefusal(fmt.Sprintf("interactive calls waiting for their turn on one connection of upstream %q", u.name))
	}
	g.waiting++
	p.mu.Unlock()
	select {
	case g.turn <- struct{}{}:
	case <-ctx.Done():
		p.mu.Lock()
		g.waiting--
		p.mu.Unlock()
		return nil, nil, ctx.Err()
	}
	p.mu.Lock()
	g.waiting--
	p.mu.Unlock()
	return c, func() { <-g.turn }, nil
}

// unattributedHint is what the refusal of an unattributed request tells
// the caller to do.
func (u *Upstream) unattributedHint() string {
	if u.cfg.InteractivePool <= 0 {
		return fmt.Sprintf("set upstreams.%s.interactive_pool (0 turns off the connections that give each interactive call its own)", u.name)
	}
	return fmt.Sprintf("a call from a client that declared sampling or elicitation runs where it is the only call in flight (upstreams.%s.interactive_pool), so this request came outside any call, or while a call of a client that declared neither was in flight beside it; retry the call", u.name)
}
