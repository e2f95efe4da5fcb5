// Package core is the transport-agnostic heart of mcpgw's downstream side:
// Handle answers one MCP request of a session by passing it down its
// route's chain of stages (chain.go) — access policy, rate limits and
// pinning (guard.go), the audit record (audit.go), lists and routed calls
// over the host's view (dispatch.go), what an upstream sends during a
// call (callstream.go), bridging between revisions (bridge.go) — and the
// core fans out what upstreams send outside calls (list changes, resource
// updates, notify.go) to the sessions and listen streams it concerns. The
// transports (packages streamable and serial) carry messages in and out;
// the stored sessions live in package sessions.
package core

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/workers"
)

// Stored is how the core reaches the stored sessions (package sessions),
// which it notifies and which a reload may end.
type Stored interface {
	// All returns every stored session.
	All() []*Session
	// Lookup returns the stored session with id, or nil.
	Lookup(id string) *Session
	// Remove ends the stored session with id.
	Remove(id string)
}

// Upstreams is what the core needs of the upstream set (*host.Host is
// one; the router wires it in): upstreams by name and requests to them.
// Everything else the core asks of upstreams goes through the catalog
// (Route.View); the core never holds an upstream's connection, and never
// imports the host (docs/architecture.md, Import rules).
type Upstreams interface {
	// Stateful reports whether the named upstream gives each downstream
	// session its own connection; ok is false when there is no such
	// upstream.
	Stateful(name string) (stateful, ok bool)
	// SubscriptionCall sends method with params to the named upstream on
	// the connection resource subscriptions use (that of ctx's session,
	// upcall.WithSession, on a stateful upstream).
	SubscriptionCall(ctx context.Context, name, method string, params json.RawMessage) (*jsonrpc.Message, error)
	// ReleaseSession closes (or, byClient false in a fleet, detaches) the
	// stored session's own connections to stateful upstreams.
	ReleaseSession(session string, byClient bool)
}

// Options configure a Core.
type Options struct {
	Logger *zap.Logger
	// ServerInfo is what initialize and server/discover report.
	ServerInfo mcp.Implementation
	// Metrics counts requests, decisions and bridged calls (nil: none).
	Metrics *metrics.Metrics
	// Tracer makes a server span per request (nil: tracing off; telemetry.go).
	Tracer trace.Tracer
	// SessionKeys (sessions.key_file) also key the bridge's requestStates,
	// so that every replica can verify them; AdvertiseURL
	// (sessions.advertise_url) names this replica in them.
	SessionKeys  [][]byte
	AdvertiseURL string
	// Current returns the generation in force.
	Current func() *Generation
	// Sessions are the stored sessions.
	Sessions Stored
	// Shared, in a fleet (sessions.redis), says which replica holds each
	// stored session's resource subscriptions (nil: this replica alone).
	Shared SharedSubscriptions
	// TaskNotification finds who an upstream's notifications/tasks/status
	// (sent outside any call) is for, and the notification as that
	// session sees it (catalog.TaskNotification, over the host's task
	// index). nil: such notifications reach no one.
	TaskNotification func(upstream, session string, params json.RawMessage) (to string, p json.RawMessage, ok bool)
}

// SharedSubscriptions tell a fleet which replica holds each stored
// session's resource subscriptions, so that one made through replica A and
// ended through B (round robin sends them anywhere) is released on A, and
// one made again through B is not held twice (which would deliver every
// update twice).
type SharedSubscriptions interface {
	// Hold records that this replica holds session's subscription to the
	// upstream's uri; false when another replica already does. When the
	// fleet cannot be asked it answers true: held here.
	Hold(session, upstream, uri string) bool
	// Release ends the record and tells the other replicas, so that the
	// one holding it drops it.
	Release(session, upstream, uri string)
	// Watch calls drop for every Release by another replica (match tells
	// the session by its id). Call it once.
	Watch(drop func(match func(id string) bool, upstream, uri string))
}

// Core answers requests and fans out upstream notifications. Its
// goroutines (list-change coalescer, bridged calls, subscription releases)
// end with Close.
type Core struct {
	log       *zap.Logger
	opts      Options
	host      Upstreams
	subs      *subscriptions
	changes   chan listChange
	pinWarned pinVerdicts // pinning verdicts already logged (pinmemo.go)

	listenersMu sync.Mutex
	listeners   map[*Session]*mcp.ListenFilter // open subscriptions/listen streams
	listenersBy map[string]int                 // how many each principal has open (listen.go)

	bridge *bridge // session-revision upstreams' input requests parked for stateless callers

	levelsMu sync.Mutex
	levels   map[string]string // log level last asked of each shared upstream

	cut cutter // Cut: what the drain left is answered and cancelled (shutdown.go)

	elicits elicitations // URL-mode elicitations handed out, by id (elicitations.go)

	// ctx is what the core's own work derives from (bridged calls,
	// unsubscribe and restore requests to upstreams): Close cancels it, so
	// that nothing the core started outlives the core; Cut cancels it
	// first, with errCut, which is how a bridged call is cut.
	ctx    context.Context
	cancel context.CancelCauseFunc

	holds holdClock // Serve's priming holds (holdclock.go)

	requests sync.Pool // *Request, kept between Handle's calls (chain.go)

	queued atomic.Int64 // bytes waiting for every client to read them (queuebytes.go)

	stop  chan struct{}
	drain chan struct{} // closed by Drain: no new sessions, streams end
	wg    sync.WaitGroup
	pool  *workers.Pool // the goroutines of Start and Go, kept warm between calls

	serverInfo json.RawMessage // opts.ServerInfo encoded once: every 2026-07-28 answer may carry it
	goMu       sync.Mutex      // guards closed against Go's wg.Add
	closed     bool            // Close began: Go starts nothing
	once       sync.Once
	drainOnce  sync.Once
}

// The calls' goroutines kept between calls (internal/workers): as many
// as a busy gateway has calls in flight, each for 2–4 s after the load
// (so that a burst leaves no goroutines behind for long).
const (
	maxIdleWorkers = 256
	idleWorkerTime = 2 * time.Second
)

// New makes the core over the upstreams h and starts its list-change coalescer.
func New(h Upstreams, opts Options) *Core {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.ServerInfo.Name == "" {
		opts.ServerInfo = mcp.Implementation{Name: "mcpgw", Version: "dev"}
	}
	c := &Core{
		log:         opts.Logger,
		opts:        opts,
		host:        h,
		subs:        newSubscriptions(),
		changes:     make(chan listChange, 64),
		listeners:   map[*Session]*mcp.ListenFilter{},
		listenersBy: map[string]int{},
		levels:      map[string]string{},
		pinWarned:   pinVerdicts{met: opts.Metrics},
		bridge:      newBridge(opts.Metrics, opts.SessionKeys, opts.AdvertiseURL),
		stop:        make(chan struct{}),
		drain:       make(chan struct{}),
		pool:        workers.New(maxIdleWorkers, idleWorkerTime),
	}
	c.serverInfo = mustJSON(opts.ServerInfo)
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.wg.Add(1)
	go c.coalesce()
	if opts.Shared != nil {
		opts.Shared.Watch(c.releasedElsewhere)
	}
	return c
}

// Logger is the core's logger.
func (c *Core) Logger() *zap.Logger { return c.log }

// Metrics is where the core counts (nil: nowhere).
func (c *Core) Metrics() *metrics.Metrics { return c.opts.Metrics }

// Drain prepares a graceful stop: new sessions are refused and standalone
// streams end (clients reconnect elsewhere), while in-flight requests go on.
// SetSessionKeys rekeys the bridge's requestStates with a rotated session
// key ring (sessions.key_file reread on a reload); a core without a ring
// keeps its random key (a ring cannot be turned on by a reload).
func (c *Core) SetSessionKeys(keys [][]byte) {
	if len(keys) > 0 {
		c.bridge.setKeys(keys)
	}
}

func (c *Core) Drain() {
	c.drainOnce.Do(func() { close(c.drain) })
}

// Draining is closed once Drain was called.
func (c *Core) Draining() <-chan struct{} { return c.drain }

// Done is closed once Close began.
func (c *Core) Done() <-chan struct{} { return c.stop }

// Close stops the core: parked calls are cancelled, endSessions ends every
// stored session (cancelling what is still in flight), and Close waits for
// the core's goroutines.
func (c *Core) Close(endSessions func()) {
	c.Drain()
	c.once.Do(func() {
		c.goMu.Lock()
		c.closed = true
		c.goMu.Unlock()
		close(c.stop)
		c.cancel(nil)
		c.bridge.closeAll()
		endSessions()
		c.wg.Wait()
		c.holds.stop()
		c.pool.Close()
	})
}

// Go runs f on a goroutine Close waits for, unless Close has begun (then
// it reports false and runs nothing): a WaitGroup must not be added to
// once it may be waited on at zero.
func (c *Core) Go(f func()) bool {
	c.goMu.Lock()
	defer c.goMu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	c.pool.Go(func() {
		defer c.wg.Done()
		f()
	})
	return true
}

// EndSession releases what an ended stored session held elsewhere: its
// resource subscriptions and stateful upstreams' per-session connections.
func (c *Core) EndSession(s *Session) {
	c.EndSubscriptions(s)
	c.host.ReleaseSession(s.id, s.EndedByClient())
}
