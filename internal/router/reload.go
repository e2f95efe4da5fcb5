package router

import (
	"slices"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// Config reload, the router's part. Reload builds the new generation —
// routes and their views over the host's new upstream set, the chi mux, the
// authenticator, policy, limiter, pinner and audit log — and swaps it in
// with one atomic store: a request reads the generation once (ServeHTTP
// picks the mux, dispatch the session's route, which carries its
// generation), so it is served wholly by the old or wholly by the new one.
//
// Sessions survive: each moves to the new generation's route of the same
// path; a session whose route path is gone is ended (404 afterwards). Then
// every session and listen stream whose lists may have changed is told so
// with notifications/{tools,prompts,resources}/list_changed.

// listMethods are the list_changed notifications a reload sends.
var listMethods = []string{mcp.NotificationToolsListChanged, mcp.NotificationPromptsChanged, mcp.NotificationResourcesChanged}

// Reload swaps in the generation of cfg, with the Auth, Policy, Limiter,
// Pinner and Audit of o (the router's other Options stay as they were). The
// host must already hold the new upstream set (host.Apply). touched names
// the upstreams added, removed or changed; everything says that lists may
// have changed for every session (a policy or auth change). It returns how
// many sessions ended because their route is gone.
func (rt *Router) Reload(cfg *config.Config, o Options, touched []string, everything bool) (ended int) {
	next := rt.build(cfg, o)
	rt.gen.Store(next)

	changed := func(prev, cur *route) bool {
		if everything || prev.view.Prefixed() != cur.view.Prefixed() || !slices.Equal(prev.view.Upstreams(), cur.view.Upstreams()) {
			return true
		}
		return slices.ContainsFunc(cur.view.Upstreams(), func(u string) bool { return slices.Contains(touched, u) })
	}
	for _, s := range rt.sessions.all() {
		prev := s.route()
		cur := next.byPath[prev.path]
		if cur == nil {
			rt.sessions.remove(s.id)
			ended++
			continue
		}
		s.setRoute(cur)
		if changed(prev, cur) {
			for _, m := range listMethods {
				if b, err := jsonrpc.Encode(jsonrpc.NewNotification(m, nil)); err == nil {
					s.send(b)
				}
			}
		}
	}
	rt.listenersMu.Lock()
	for s := range rt.listeners {
		prev := s.route()
		cur := next.byPath[prev.path]
		if cur == nil {
			s.cancel() // ends the listen stream
			continue
		}
		s.setRoute(cur)
		if changed(prev, cur) {
			for _, m := range listMethods {
				if !s.filter.wants(m) {
					continue
				}
				if b, err := jsonrpc.Encode(jsonrpc.NewNotification(m, s.tag(nil))); err == nil {
					s.send(b)
				}
			}
		}
	}
	rt.listenersMu.Unlock()

	// A replaced upstream's new connection has not been asked for a log
	// level yet.
	rt.levelsMu.Lock()
	for _, u := range touched {
		delete(rt.levels, u)
	}
	rt.levelsMu.Unlock()
	if ended > 0 {
		rt.log.Info("ended sessions whose route the reload removed", zap.Int("count", ended))
	}
	return ended
}

// routeOf is the route a stored session's request is served by: its route
// in the generation in force. A session created by the previous
// generation's mux while a reload swapped generations is moved here (or
// ended, when its route is gone: nil).
func (rt *Router) routeOf(sess *Session) *route {
	rte := sess.route()
	if sess.stateless {
		return rte // lives for one request of the generation that routed it
	}
	cur := rt.current()
	if rte.gen == cur {
		return rte
	}
	next := cur.byPath[rte.path]
	if next == nil {
		rt.sessions.remove(sess.id)
		return rte // the session's context is cancelled: the request ends
	}
	sess.setRoute(next)
	return next
}
