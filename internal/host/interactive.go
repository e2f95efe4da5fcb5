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
// elicitation) belongs to, so the client names the only interactive call
// in flight on the connection, and refuses the request when there are
// several. Refusing is right; refusing most interactive calls is not. So
// once an upstream has shown that it asks its callers (learned), each call
// that could be asked gets a connection on which it is the only
// interactive call in flight, which makes the owner rule exact:
//
//   - shared upstream: a pool of at most interactive_pool connections
//     (children, for stdio), made on demand and closed when idle; a call
//     that finds them all busy waits, up to interactiveQueuePerConn per
//     connection, then is refused naming the key;
//   - the session's own connection (stateful: true), a capability view or
//     an acting-for connection: one interactive call at a time on it, the
//     others waiting the same way (a second child would not share the
//     session's state).
//
// Until learned, calls take the shared fast path untouched: one atomic load.

// interactiveIdle is how long a pool connection is kept unused.
const interactiveIdle = 2 * time.Minute

// interactiveQueuePerConn bounds the calls waiting for a connection (of the
// pool, or for a session's turn) per connection they wait for. A waiting
// call is its request's goroutine parked on a channel, and the router
// already bounds requests per session: deep enough that a burst from
// several sessions waits rather than fails.
const interactiveQueuePerConn = 64

type interactivePool struct {
	learned atomic.Bool
	logGate logGate // unattributed refusals' log lines

	mu      sync.Mutex
	idle    []idleConn
	busy    map[*client.Client]bool
	opening int // being dialled (hold a slot)
	waiting int
	slots   chan struct{}    // one per connection in use or being made
	timer   *time.Timer      // reaps idle connections
	now     func() time.Time // nil: time.Now (tests set it)
	closed  bool
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

// asksCallers reports whether method, sent by the upstream, needs the
// caller: what makes an upstream interactive.
func (u *Upstream) asksCallers(method string) bool {
	switch method {
	case mcp.MethodSamplingCreateMessage, mcp.MethodElicitationCreate:
		return true
	case mcp.MethodRootsList:
		return u.cfg.ForwardRoots
	}
	return false
}

// learnRequest is every connection's client.Options.OnServerRequest.
func (u *Upstream) learnRequest(method string) {
	if u.asksCallers(method) && !u.interactive.learned.Load() && u.interactive.learned.CompareAndSwap(false, true) && u.cfg.InteractivePool > 0 {
		u.log.Info("upstream asks its callers (server→client requests); from now on each interactive call gets a connection where it is the only one in flight",
			zap.String("method", method), zap.Int("interactive_pool", u.cfg.InteractivePool))
	}
}

// Interactive returns the connection a call should use instead of c, the
// one ClientFor chose, and what to call when the call is done (never nil).
// A call is moved only when the upstream has been seen to ask its callers,
// the caller can be asked (canAsk), the method is a call, and c cannot
// attribute requests itself. params with a task member stay on c: the
// task's later requests must find the connection that created it.
func (u *Upstream) Interactive(ctx context.Context, c *client.Client, method string, params json.RawMessage, canAsk bool) (*client.Client, func(), error) {
	if !u.interactive.learned.Load() || !canAsk || u.cfg.InteractivePool <= 0 {
		return c, noRelease, nil
	}
	if !mcp.Method(method).Interactive {
		return c, noRelease, nil
	}
	if c.Attributes() || c.Modern() {
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
	return u.pooled(ctx)
}

func noRelease() {}

// refusal is the error of a call that found the queue full.
func (u *Upstream) interactiveRefusal(what string) error {
	r := &limits.Refusal{Bound: "upstreams." + u.name + ".interactive_pool", Max: u.cfg.InteractivePool, RetryAfter: 1, What: what}
	u.host.opts.Metrics.LimitRefused(r.Bound)
	u.log.Warn("interactive call refused: every connection busy and the queue full", zap.String("bound", r.Bound), zap.String("what", what))
	return r
}

// pooled takes a pool connection for one call, making one when none is
// idle and fewer than interactive_pool are open.
func (u *Upstream) pooled(ctx context.Context) (*client.Client, func(), error) {
	p := &u.interactive
	size := u.cfg.InteractivePool
	p.mu.Lock()
	if p.closed || u.ctx.Err() != nil {
		p.mu.Unlock()
		return nil, nil, &UnavailableError{Upstream: u.name, State: StateStopped}
	}
	if p.slots == nil {
		p.slots = make(chan struct{}, size)
	}
	if p.waiting >= size*interactiveQueuePerConn {
		p.mu.Unlock()
		return nil, nil, u.interactiveRefusal(fmt.Sprintf("interactive calls waiting for a connection of upstream %q", u.name))
	}
	p.waiting++
	slots := p.slots
	p.mu.Unlock()
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		return nil, nil, ctx.Err()
	}
	p.mu.Lock()
	p.waiting--
	var dead []*client.Client
	var c *client.Client
	for c == nil && len(p.idle) > 0 {
		ic := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		select {
		case <-ic.c.Done():
			dead = append(dead, ic.c)
		default:
			c = ic.c
		}
	}
	if c == nil {
		p.opening++
	} else {
		p.markBusyLocked(c)
	}
	u.metricPoolLocked()
	p.mu.Unlock()
	if len(dead) > 0 {
		u.closeLater(dead)
	}
	if c == nil {
		nc, err := u.connectOpts(ctx, "legacy", nil)
		p.mu.Lock()
		p.opening--
		if err == nil && p.closed {
			err = &UnavailableError{Upstream: u.name, State: StateStopped}
			defer func() { _ = nc.Close() }()
		} else if err == nil {
			p.markBusyLocked(nc)
		}
		u.metricPoolLocked()
		p.mu.Unlock()
		if err != nil {
			<-slots
			if _, ok := err.(*UnavailableError); ok {
				return nil, nil, err
			}
			return nil, nil, &UnavailableError{Upstream: u.name, State: StateDown, Cause: err}
		}
		u.log.Debug("opened an interactive connection")
		c = nc
	}
	return c, func() { u.unpool(c, slots) }, nil
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

// unpool gives c back after its call.
func (u *Upstream) unpool(c *client.Client, slots chan struct{}) {
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
	p.mu.Unlock()
	<-slots
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
	p.idle, p.busy, p.gates = nil, nil, nil
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
	switch {
	case u.cfg.InteractivePool <= 0:
		return fmt.Sprintf("set upstreams.%s.interactive_pool (0 turns off the connections that give each interactive call its own)", u.name)
	case u.cfg.Stateful:
		return "mcpgw has now learned that this upstream asks its callers and runs each session's interactive calls on it one at a time; retry the call"
	}
	return fmt.Sprintf("mcpgw has now learned that this upstream asks its callers and gives each interactive call a connection of its own (upstreams.%s.interactive_pool); retry the call", u.name)
}
