package host

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
)

// Stateful upstreams (stateful: true) keep per-user state in their
// session, so users must never share one: each downstream session gets a
// connection of its own (a child process of its own, for stdio), made on the
// session's first request and closed when the session ends. Everything the
// upstream sends on it — server requests, log messages, list changes,
// resource updates — belongs to that session alone, so the association rule
// for shared stdio upstreams is not needed there.

// MaxSessionsPerUpstream bounds the connections one stateful upstream may
// hold: a flood of sessions must not spawn unbounded children.
const MaxSessionsPerUpstream = 64

type sessionKey struct{}

// WithSession marks ctx as belonging to the downstream session key, so
// that stateful upstreams use that session's own connection.
func WithSession(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return context.WithValue(ctx, sessionKey{}, key)
}

func sessionFrom(ctx context.Context) string {
	k, _ := ctx.Value(sessionKey{}).(string)
	return k
}

// Stateful reports whether the upstream gives each session its own connection.
func (u *Upstream) Stateful() bool { return u.cfg.Stateful }

// perSession holds a stateful upstream's connections by session key.
type perSession struct {
	mu    sync.Mutex
	conns map[string]*client.Client
}

// sessionClient returns the session's own connection, making it on first
// use. Concurrent first requests of one session share one connection.
func (u *Upstream) sessionClient(ctx context.Context, key string) (*client.Client, error) {
	ps := &u.perSession
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if c := ps.conns[key]; c != nil {
		select {
		case <-c.Done():
			_ = c.Close()
			delete(ps.conns, key)
		default:
			return c, nil
		}
	}
	if u.ctx.Err() != nil {
		return nil, &UnavailableError{Upstream: u.name, State: StateStopped}
	}
	if len(ps.conns) >= MaxSessionsPerUpstream {
		return nil, fmt.Errorf("upstream %q is stateful and already holds %d session connections; end idle sessions (sessions.idle_timeout) or share it (stateful: false)", u.name, MaxSessionsPerUpstream)
	}
	c, err := u.connectSession(ctx, key)
	if err != nil {
		return nil, &UnavailableError{Upstream: u.name, State: StateDown, Cause: err}
	}
	if ps.conns == nil {
		ps.conns = map[string]*client.Client{}
	}
	ps.conns[key] = c
	u.log.Debug("opened a per-session upstream connection", zap.Int("connections", len(ps.conns)))
	return c, nil
}

// connectSession connects like the shared connection, but its notifications
// are the session's own.
func (u *Upstream) connectSession(ctx context.Context, key string) (*client.Client, error) {
	notify := u.host.opts.OnSessionNotification
	return u.connectOpts(ctx, u.cfg.Protocol, func(method string, params json.RawMessage) {
		if notify != nil {
			notify(key, u.name, method, params)
		}
	})
}

// ReleaseSession closes every stateful upstream's connection of a session
// that ended. It does not wait: children are stopped on a goroutine the
// host owns.
func (h *Host) ReleaseSession(key string) {
	var conns []*client.Client
	h.mu.Lock()
	ups := h.allLocked()
	h.mu.Unlock()
	for _, u := range ups {
		u.perSession.mu.Lock()
		if c := u.perSession.conns[key]; c != nil {
			conns = append(conns, c)
			delete(u.perSession.conns, key)
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
	conns := u.perSession.conns
	u.perSession.conns = nil
	u.perSession.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// listClient is the connection a list is asked on: the session's own for a
// stateful upstream (its lists may depend on the session's state), else the
// shared one. An upstream still making its first connection is waited for
// only briefly (startup.go).
func (u *Upstream) listClient(ctx context.Context) (*client.Client, error) {
	if err := u.awaitStartForList(ctx); err != nil {
		return nil, err
	}
	if key := sessionFrom(ctx); key != "" && u.cfg.Stateful {
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
