package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// What the admin listener's status page and /status/* endpoints report
// (admin.go serves them): the upstreams, the routes with their catalog
// sizes and sessions, and the reload history. Everything is read when
// asked; nothing here is on the MCP request path.

// UpstreamStatus is one upstream in /status/upstreams.
type UpstreamStatus struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Required  bool   `json:"required"`
	Transport string `json:"transport"`
	// ProtocolVersion is the revision the connection negotiated.
	ProtocolVersion string `json:"protocol_version,omitempty"`
	Restarts        int64  `json:"restarts"`
	BreakerOpen     bool   `json:"breaker_open"`
	// RetryAt is the next attempt while the breaker is open.
	RetryAt            *time.Time `json:"retry_at,omitempty"`
	LastError          string     `json:"last_error,omitempty"`
	PID                int        `json:"pid,omitempty"`
	InFlight           int64      `json:"in_flight"`
	Stateful           bool       `json:"stateful,omitempty"`
	SessionConnections int        `json:"session_connections,omitempty"`
	// Sandbox is the sandbox the child runs in; SandboxKills the children
	// a sandbox limit killed.
	Sandbox      string `json:"sandbox,omitempty"`
	SandboxKills int64  `json:"sandbox_kills,omitempty"`
}

// RouteStatus is one route on the status page.
type RouteStatus struct {
	Path      string   `json:"path"`
	Upstreams []string `json:"upstreams"`
	Prefixed  bool     `json:"prefixed"`
	Sessions  int      `json:"sessions"`
	Streams   int      `json:"streams"` // standalone and listen streams
	// Catalog sizes (unfiltered by policy), and what could not be listed.
	Tools             int      `json:"tools"`
	Prompts           int      `json:"prompts"`
	Resources         int      `json:"resources"`
	ResourceTemplates int      `json:"resource_templates"`
	CatalogErrors     []string `json:"catalog_errors,omitempty"`
}

// ReloadEvent is one entry of the reload history.
type ReloadEvent struct {
	Time    time.Time `json:"time"`
	Initial bool      `json:"initial,omitempty"` // the load at start
	OK      bool      `json:"ok"`
	Error   string    `json:"error,omitempty"`
	Added   []string  `json:"added,omitempty"`
	Removed []string  `json:"removed,omitempty"`
	Changed []string  `json:"changed,omitempty"`
}

// Status is everything the status page shows.
type Status struct {
	Version   string           `json:"version"`
	StartedAt time.Time        `json:"started_at"`
	Readiness Readiness        `json:"readiness"`
	Upstreams []UpstreamStatus `json:"upstreams"`
	Routes    []RouteStatus    `json:"routes"`
	Reloads   []ReloadEvent    `json:"reloads"`
	Tracing   string           `json:"tracing"` // where spans go, or "off"
	Pprof     bool             `json:"pprof"`
}

// maxReloadHistory bounds the reload history.
const maxReloadHistory = 20

// reloadHistory keeps the latest reloads, newest first.
type reloadHistory struct {
	mu     sync.Mutex
	events []ReloadEvent
}

func (h *reloadHistory) add(e ReloadEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append([]ReloadEvent{e}, h.events...)
	if len(h.events) > maxReloadHistory {
		h.events = h.events[:maxReloadHistory]
	}
}

func (h *reloadHistory) list() []ReloadEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// recordReload adds a reload's outcome to the history.
func (g *Gateway) recordReload(err error, diff *host.Diff) {
	e := ReloadEvent{Time: time.Now(), OK: err == nil}
	if err != nil {
		e.Error = err.Error()
	}
	if diff != nil {
		e.Added, e.Removed, e.Changed = diff.Added, diff.Removed, diff.Changed
	}
	g.reloads.add(e)
}

// UpstreamStatuses reports every upstream, in name order.
func (g *Gateway) UpstreamStatuses() []UpstreamStatus {
	var out []UpstreamStatus
	for _, name := range g.host.Names() {
		u := g.host.Upstream(name)
		if u == nil {
			continue
		}
		st := u.Status()
		us := UpstreamStatus{
			Name: st.Name, State: string(st.State), Required: st.Required, Transport: st.Transport,
			ProtocolVersion: st.Protocol, Restarts: st.Restarts, BreakerOpen: st.State == host.StateBreakerOpen,
			PID: st.PID, InFlight: st.InFlight, Stateful: st.Stateful, SessionConnections: st.SessionConnections,
			Sandbox: st.Sandbox, SandboxKills: st.SandboxKills,
		}
		if !st.RetryAt.IsZero() {
			at := st.RetryAt
			us.RetryAt = &at
		}
		if st.LastError != nil && st.State != host.StateReady {
			us.LastError = g.red.scrub(st.LastError.Error())
		}
		out = append(out, us)
	}
	return out
}

// Catalog is a route's merged catalog as its clients would list it, before
// the access policy (which depends on who asks): the object form `mcpgw
// catalog --catalog` reads.
type Catalog struct {
	Route             string            `json:"route"`
	Tools             []json.RawMessage `json:"tools"`
	Prompts           []json.RawMessage `json:"prompts"`
	Resources         []json.RawMessage `json:"resources"`
	ResourceTemplates []json.RawMessage `json:"resourceTemplates"`
	// Errors say which lists could not be read completely.
	Errors []string `json:"errors,omitempty"`
}

// maxCatalogPages bounds how many pages of one list are read.
const maxCatalogPages = 500

// ErrNoRoute is returned by Catalog for a path that is no route.
type ErrNoRoute struct {
	Path  string
	Paths []string
}

func (e *ErrNoRoute) Error() string {
	return fmt.Sprintf("no route %q; routes: %v", e.Path, e.Paths)
}

// Catalog lists route's whole catalog (every page of the four lists);
// path "" is the first route.
func (g *Gateway) Catalog(ctx context.Context, path string) (*Catalog, error) {
	cfg := g.cfg.Load()
	var paths []string
	for _, rc := range cfg.Routes {
		paths = append(paths, rc.Path)
		if path == "" {
			path = rc.Path
		}
		if rc.Path != path {
			continue
		}
		view := catalog.RouteView(g.host, rc) // what the route itself serves
		c := &Catalog{Route: rc.Path}
		for _, l := range []struct {
			kind catalog.ListKind
			into *[]json.RawMessage
		}{{catalog.Tools, &c.Tools}, {catalog.Prompts, &c.Prompts}, {catalog.Resources, &c.Resources}, {catalog.ResourceTemplates, &c.ResourceTemplates}} {
			items, err := listAll(ctx, view, l.kind)
			*l.into = items
			if err != nil {
				c.Errors = append(c.Errors, l.kind.Method+": "+err.Error())
			}
		}
		return c, nil
	}
	return nil, &ErrNoRoute{Path: path, Paths: paths}
}

// listAll reads every page of one merged list.
func listAll(ctx context.Context, view *catalog.View, kind catalog.ListKind) ([]json.RawMessage, error) {
	items := []json.RawMessage{}
	params := json.RawMessage(`{}`)
	for range maxCatalogPages {
		res, jerr := view.List(ctx, kind, params)
		if jerr != nil {
			return items, fmt.Errorf("%s", jerr.Message)
		}
		if arr, ok := rawjson.Get(res, kind.Key); ok {
			page, err := rawjson.Elements(arr)
			if err != nil {
				return items, err
			}
			for _, it := range page {
				items = append(items, json.RawMessage(it))
			}
		}
		next, _ := rawjson.GetString(res, "nextCursor")
		if next == "" {
			return items, nil
		}
		params, _ = json.Marshal(map[string]string{"cursor": next})
	}
	return items, fmt.Errorf("more than %d pages; listed the first ones", maxCatalogPages)
}

// catalogTimeout bounds the lists of one status page.
const catalogTimeout = 5 * time.Second

// Status gathers the status page.
func (g *Gateway) Status(ctx context.Context) Status {
	cfg := g.cfg.Load()
	st := Status{
		Version: g.opts.Version, StartedAt: g.started, Readiness: g.Readiness(),
		Upstreams: g.UpstreamStatuses(), Reloads: g.reloads.list(), Tracing: "off",
		Pprof: cfg.Admin != nil && cfg.Admin.Pprof,
	}
	if s := g.tracing.Settings(); s != nil {
		st.Tracing = s.Protocol + " " + g.red.scrub(s.Endpoint)
	} else if g.opts.TracerProvider != nil {
		st.Tracing = "on (injected provider)"
	}
	sessions := map[string][2]int{}
	for _, rs := range g.router.RouteStats() {
		sessions[rs.Route] = [2]int{rs.Sessions, rs.Standalone + rs.Listen}
	}
	ctx, cancel := context.WithTimeout(ctx, catalogTimeout)
	defer cancel()
	for _, rc := range cfg.Routes {
		r := RouteStatus{Path: rc.Path, Upstreams: cfg.RouteUpstreams(rc), Prefixed: rc.Prefixed(),
			Sessions: sessions[rc.Path][0], Streams: sessions[rc.Path][1]}
		if c, err := g.Catalog(ctx, rc.Path); err != nil {
			r.CatalogErrors = []string{err.Error()}
		} else {
			r.Tools, r.Prompts, r.Resources, r.ResourceTemplates = len(c.Tools), len(c.Prompts), len(c.Resources), len(c.ResourceTemplates)
			r.CatalogErrors = c.Errors
		}
		st.Routes = append(st.Routes, r)
	}
	return st
}

// scrub replaces the config's secrets in s (redact.go's set), for text
// shown on the admin listener.
func (r *redactor) scrub(s string) string {
	if r == nil {
		return s
	}
	set := r.set.Load()
	if set == nil || len(set.secrets) == 0 {
		return s
	}
	return set.r.Replace(s)
}
