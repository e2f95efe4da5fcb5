// Package catalog owns the merged, namespaced catalog a route shows of its
// upstreams (View): the per-route naming of tools, prompts, resources and
// templates (naming.go, rewrite.go), the merged and paged lists (pages.go),
// routing a request to the upstream that owns its target (Forward), what
// the gateway indexes of each upstream's lists and tool definitions
// (index.go, schemas.go) and the tool search over them (toolindex.go), what
// a route lists for one caller, for the guard's checks (listed.go), the
// route's merged capabilities (capabilities.go), the 2026-07-28 parameter
// headers (paramheaders.go), and the task ids handed to clients and the
// 2025-11-25 task index (tasks.go).
//
// It reaches the upstreams through internal/host (catalogapi.go there): the
// host supervises connections, the catalog decides what they show and where
// a request goes. The catalog imports host, never the other way; its
// per-upstream and host-wide state is kept on the host's objects as their
// Extension, so it lives and is dropped with them.
package catalog

import (
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/host"
)

// upstreamState is the catalog's side of one host upstream: the upstream
// itself, and what the catalog indexes of it.
type upstreamState struct {
	*host.Upstream
	schemas toolSchemas
	lists   listCache // prompts, resources and templates it lists (index.go)
	full    fullLists // its complete lists, to answer list requests (listcache.go)
	ver     atomic.Uint64
	clock   func() time.Time // nil: time.Now (ttlMs of cached lists)
}

// ConnectionChanged drops the cached tool definitions and lists: a new
// connection may offer others (the host calls it on every change of state).
func (u *upstreamState) ConnectionChanged() {
	u.schemas.invalidate()
	u.bump()
}

// stateOf is the catalog's state of u, made on first use.
func stateOf(u *host.Upstream) *upstreamState {
	return u.Extension(func() host.Extension { return &upstreamState{Upstream: u} }).(*upstreamState)
}

// tasksOf is the task ids and index of h (one per host, shared by all its
// views, so that a token sealed on one route's view opens on the next
// generation's).
func tasksOf(h *host.Host) *tasks {
	return h.Extension(func() host.Extension {
		o := h.Options()
		return newTasks(o.TaskKeys, o.MaxTasks, o.Metrics)
	}).(*tasks)
}
