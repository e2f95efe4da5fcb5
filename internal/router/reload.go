package router

import (
	"slices"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// Config reload, the router's part. Reload builds the new generation —
// routes and their views over the host's new upstream set, the chi mux, the
// authenticator, policy, limiter, pinner and audit log — and swaps it in
// with one atomic store: a request reads the generation once (ServeHTTP
// picks the mux, core.Handle the session's route, which carries its
// generation), so it is served wholly by the old or wholly by the new one.
//
// Sessions survive: each moves to the new generation's route of the same
// path; a session whose route path is gone is ended (404 afterwards). Then
// every session and listen stream whose lists may have changed is told so
// with notifications/{tools,prompts,resources}/list_changed.

// Reload swaps in the generation of cfg, with the Auth, Policy, Limiter,
// Pinner and Audit of o (the router's other Options stay as they were). The
// host must already hold the new upstream set (host.Apply). touched names
// the upstreams added, removed or changed; everything says that lists may
// have changed for every session (a policy or auth change). It returns how
// many sessions ended because their route is gone.
func (rt *Router) Reload(cfg *config.Config, o Options, touched []string, everything bool) (ended int) {
	next := rt.build(cfg, o)
	rt.gen.Store(next)

	changed := func(prev, cur *core.Route) bool {
		if everything || prev.View.Prefixed() != cur.View.Prefixed() || !slices.Equal(prev.View.Upstreams(), cur.View.Upstreams()) ||
			!prev.View.SameCuration(cur.View) { // tool curation shows other definitions
			return true
		}
		return slices.ContainsFunc(cur.View.Upstreams(), func(u string) bool { return slices.Contains(touched, u) })
	}
	for _, s := range rt.sessions.All() {
		prev := s.Route()
		cur := next.ByPath[prev.Path]
		if cur == nil {
			rt.sessions.Remove(s.ID())
			ended++
			continue
		}
		s.SetRoute(cur)
		if changed(prev, cur) {
			for _, m := range mcp.ListChangedNotifications() {
				if b, err := jsonrpc.Encode(jsonrpc.NewNotification(m, nil)); err == nil {
					s.SendHere(b) // each replica of a fleet reloads, and tells, for itself
				}
			}
		}
	}
	rt.core.EachListener(func(s *core.Session, f *mcp.ListenFilter) {
		prev := s.Route()
		cur := next.ByPath[prev.Path]
		if cur == nil {
			s.End() // ends the listen stream
			return
		}
		s.SetRoute(cur)
		if changed(prev, cur) {
			for _, m := range mcp.ListChangedNotifications() {
				if !f.Wants(m) {
					continue
				}
				if b, err := jsonrpc.Encode(jsonrpc.NewNotification(m, s.Tag(nil))); err == nil {
					s.Send(b)
				}
			}
		}
	})

	// A replaced upstream's new connection has not been asked for a log
	// level yet.
	rt.core.ForgetLevels(touched)
	if ended > 0 {
		rt.log.Info("ended sessions whose route the reload removed", zap.Int("count", ended))
	}
	return ended
}
