package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/limits"
)

// Stateful upstreams (stateful: true) keep per-user state in their
// session, so users must never share one: each downstream session gets a
// connection of its own (a child process of its own, for stdio), made on the
// session's first request and closed when the session ends. Everything the
// upstream sends on it — server requests, log messages, list changes,
// resource updates — belongs to that session alone, so the association rule
// for shared stdio upstreams is not needed there. In a fleet, an HTTP
// upstream's per-session session is shared by the replicas
// (fleetsessions.go).

// Stateful reports whether the upstream gives each session its own connection.
func (u *Upstream) Stateful() bool { return u.cfg.Stateful }

// perSession holds a stateful upstream's connections by session key, at
// most upstreams.NAME.max_sessions of them (a flood of sessions must not
// spawn unbounded children) and max_sessions_per_principal for one
// authenticated principal (one client must not take every slot).
type perSession struct {
	mu      sync.Mutex
	conns   map[string]*client.Client
	owner   map[string]string // session key -> principal key, for those that have one
	byOwner map[string]int
	// subjects are whom an acting-for upstream's connections act for, by
	// session key (actingfor.go).
	subjects map[string]*credentials.Cell
	// lastUse is when a stateless principal's connection of an acting-for
	// upstream was last handed out: no session end releases those, so
	// they are closed once idle for principalConnIdle (reapLocked).
	lastUse map[string]time.Time
	now     func() time.Time // nil: time.Now (tests set it)
	// shared is, for a fleet's sessions, the upstream session id (stdio:
	// the replica id) each connection's UpstreamSessions record names;
	// touched is when it was last refreshed (fleetsessions.go).
	shared  map[string]string
	touched map[string]time.Time
}

// principalConnIdle is how long a stateless principal's own connection of
// an acting-for upstream is kept unused before it is closed.
const principalConnIdle = 10 * time.Minute

// reapLocked takes out the stateless principals' connections unused for
// principalConnIdle and awaiting no answer (a call still running keeps
// its connection), and returns them for closing.
func (ps *perSession) reapLocked(now time.Time) []*client.Client {
	var idle []*client.Client
	for key, at := range ps.lastUse {
		c := ps.conns[key]
		if now.Sub(at) <= principalConnIdle || (c != nil && c.Pending() > 0) {
			continue
		}
		if c != nil {
			idle = append(idle, c)
		}
		ps.dropLocked(key)
	}
	return idle
}

// dropLocked forgets the connection of session key.
func (ps *perSession) dropLocked(key string) {
	delete(ps.conns, key)
	delete(ps.subjects, key)
	delete(ps.lastUse, key)
	delete(ps.shared, key)
	delete(ps.touched, key)
	if o, ok := ps.owner[key]; ok {
		delete(ps.owner, key)
		if ps.byOwner[o]--; ps.byOwner[o] <= 0 {
			delete(ps.byOwner, o)
		}
	}
}

// sessionClient returns the session's own connection, making it on first
// use. Concurrent first requests of one session share one connection.
func (u *Upstream) sessionClient(ctx context.Context, key string) (*client.Client, error) {
	ps := &u.perSession
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now := time.Now()
	if ps.now != nil {
		now = ps.now()
	}
	if idle := ps.reapLocked(now); len(idle) > 0 {
		u.closeLater(idle)
	}
	if strings.HasPrefix(key, principalConnPrefix) {
		if ps.lastUse == nil {
			ps.lastUse = map[string]time.Time{}
		}
		defer func() {
			if ps.conns[key] != nil {
				ps.lastUse[key] = now
			}
		}()
	}
	owner := auth.FromContext(ctx).Key() // "": anonymous, only the upstream's bound applies
	dead := ""                           // the fleet's record of a connection that just ended: not to be continued
	if c := ps.conns[key]; c != nil {
		select {
		case <-c.Done():
			if u.fleetShared(key) {
				dead = ps.shared[key]
				u.forgetShared(key)
			}
			_ = c.Close()
			ps.dropLocked(key)
		default:
			if o := ps.owner[key]; o != owner && (o != "" || u.ActsForCaller()) {
				// Sessions are bound to their principal before they get
				// here; a connection is too, whatever happens above.
				return nil, &UnavailableError{Upstream: u.name, State: StateReady, Cause: errors.New("this session's upstream connection belongs to another principal")}
			}
			if cell := ps.subjects[key]; cell != nil {
				cell.Update(credentials.SubjectOf(ctx)) // the principal's freshest token
			}
			if ps.shared[key] != "" {
				u.touchShared(key, now)
			}
			return c, nil
		}
	}
	if u.ctx.Err() != nil {
		return nil, &UnavailableError{Upstream: u.name, State: StateStopped}
	}
	max, share := u.cfg.MaxSessions, u.cfg.MaxSessionsPerPrincipal
	if max <= 0 { // a config not made by config.Parse
		max, share = config.DefaultMaxStatefulSessions, config.DefaultMaxStatefulSessionsPerPrincipal
	}
	var refused *limits.Refusal
	// A slot frees when a session ends: by DELETE at once, else when the
	// router reaps it as detached; the hint says the latter, truthfully.
	retry := int(u.host.opts.SessionRelease.Seconds() + 0.999)
	switch {
	case len(ps.conns) >= max:
		refused = &limits.Refusal{Bound: "upstreams." + u.name + ".max_sessions", Max: max, RetryAfter: retry,
			What: fmt.Sprintf("sessions with a connection of stateful upstream %q", u.name)}
	case owner != "" && share > 0 && ps.byOwner[owner] >= share:
		refused = &limits.Refusal{Bound: "upstreams." + u.name + ".max_sessions_per_principal", Max: share, PerPrincipal: true, RetryAfter: retry,
			What: fmt.Sprintf("of this principal's sessions with a connection of stateful upstream %q", u.name)}
	}
	if refused != nil {
		u.host.opts.Metrics.LimitRefused(refused.Bound)
		return nil, refused
	}
	var cell *credentials.Cell
	if u.ActsForCaller() {
		cell = credentials.NewCell(credentials.SubjectOf(ctx)) // captured: this connection acts for them only
	}
	c, err := u.connectSession(ctx, key, cell, dead)
	if err != nil {
		if cerr := credentials.Failure(err); cerr != nil {
			return nil, cerr
		}
		return nil, &UnavailableError{Upstream: u.name, State: StateDown, Cause: err}
	}
	if ps.conns == nil {
		ps.conns, ps.owner, ps.byOwner, ps.subjects = map[string]*client.Client{}, map[string]string{}, map[string]int{}, map[string]*credentials.Cell{}
	}
	ps.conns[key] = c
	if cell != nil {
		ps.subjects[key] = cell
	}
	if owner != "" {
		ps.owner[key] = owner
		ps.byOwner[owner]++
	}
	u.log.Debug("opened a per-session upstream connection", zap.Int("connections", len(ps.conns)))
	return c, nil
}

// connectSession connects like the shared connection, but its notifications
// are the session's own.
// dead is a fleet record found dead here (fleetsessions.go).
func (u *Upstream) connectSession(ctx context.Context, key string, cell *credentials.Cell, dead string) (*client.Client, error) {
	notify := u.host.opts.OnSessionNotification
	hc := u.httpc
	if cell != nil {
		hc = u.creds.ActingClient(cell) // authorized for cell's principal only
	}
	onNote := func(method string, params json.RawMessage) {
		if notify != nil && !strings.HasPrefix(key, principalConnPrefix) {
			notify(key, u.name, method, params)
		}
	}
	if !u.fleetShared(key) {
		t, err := u.transportWith(hc)
		if err != nil {
			return nil, err
		}
		return u.dial(ctx, t, u.cfg.Protocol, onNote)
	}
	return u.connectShared(ctx, key, dead, func(resume *client.Resumption) (*client.Client, error) {
		t, err := u.transportWith(hc)
		if err != nil {
			return nil, err
		}
		return u.dialShared(ctx, t, onNote, resume)
	})
}

// ReleaseSession closes every stateful upstream's connection of a session
// that ended. It does not wait: children are stopped on a goroutine the
// host owns. byClient is an end the client asked for (DELETE, on any
// replica); otherwise (idle reaping) a fleet's session may live on at
// other replicas, so a connection recorded for the fleet only detaches
// and leaves the upstream session to them.
func (h *Host) ReleaseSession(key string, byClient bool) {
	var conns []func() error
	h.mu.Lock()
	ups := h.allLocked()
	h.mu.Unlock()
	for _, u := range ups {
		u.perSession.mu.Lock()
		if c := u.perSession.conns[key]; c != nil {
			shared := u.perSession.shared[key] != ""
			switch {
			case shared && (byClient || len(u.cfg.Command) > 0): // a stdio child ends with its connection
				u.forgetShared(key)
				conns = append(conns, c.Close)
			case shared:
				conns = append(conns, c.Detach)
			default:
				conns = append(conns, c.Close)
			}
			u.perSession.dropLocked(key)
		}
		u.perSession.mu.Unlock()
	}
	if len(conns) == 0 {
		return
	}
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.wg.Add(1) // under h.mu: never after Close has begun to wait
	}
	h.mu.Unlock()
	if closed {
		// Shutting down: Close may already be waiting, so no goroutine of
		// its own; these are out of the maps closeSessions empties.
		for _, end := range conns {
			_ = end()
		}
		return
	}
	go func() {
		defer h.wg.Done()
		for _, end := range conns {
			_ = end()
		}
	}()
}

// closeLater closes connections on a goroutine the host owns (closing a
// stdio child takes its stop graces).
func (u *Upstream) closeLater(conns []*client.Client) {
	h := u.host
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.wg.Add(1)
	}
	h.mu.Unlock()
	if closed {
		// Shutting down: Close may already be waiting, so no goroutine
		// of its own; these are out of the maps closeSessions empties.
		for _, c := range conns {
			_ = c.Close()
		}
		return
	}
	go func() {
		defer h.wg.Done()
		for _, c := range conns {
			_ = c.Close()
		}
	}()
}

// closeSessions closes every per-session connection (host shutdown).
func (u *Upstream) closeSessions() {
	u.perSession.mu.Lock()
	conns, shared := u.perSession.conns, u.perSession.shared
	u.perSession.conns, u.perSession.owner, u.perSession.byOwner = nil, nil, nil
	u.perSession.shared, u.perSession.touched = nil, nil
	u.perSession.mu.Unlock()
	for key, c := range conns {
		switch {
		case shared[key] != "" && len(u.cfg.Command) > 0:
			u.host.opts.UpstreamSessions.Forget(key, u.name, shared[key]) // its child ends here
		case shared[key] != "":
			_ = c.Detach() // the fleet's other replicas may go on with it
			continue
		}
		_ = c.Close()
	}
}

// ListClient is the connection a list is asked on: the session's own for a
// stateful upstream (its lists may depend on the session's state), the
// caller's own for an acting-for upstream without a credential of its own,
// else the shared one. An upstream still making its first connection is waited for
// only briefly (startup.go).
func (u *Upstream) ListClient(ctx context.Context) (*client.Client, error) {
	if err := u.awaitStartForList(ctx); err != nil {
		return nil, err
	}
	if u.ActsForCaller() && !u.onDemand() && !u.cfg.Stateful {
		// Its own credential (oauth:, a header) lists the catalog on the
		// shared connection; only calls act for the caller (actingfor.go).
		return u.Client(ctx)
	}
	if key, err := u.ownConnection(ctx); err != nil || key != "" { // actingfor.go
		if err != nil {
			return nil, err
		}
		return u.sessionClient(ctx, key)
	}
	return u.Client(ctx)
}

// SessionConnections is how many per-session connections a stateful
// upstream holds now.
func (u *Upstream) SessionConnections() int {
	u.perSession.mu.Lock()
	defer u.perSession.mu.Unlock()
	return len(u.perSession.conns)
}
