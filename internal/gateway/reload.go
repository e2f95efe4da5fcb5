package gateway

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/router"
)

// Hot reload, Caddy style: the new config is built completely — policy,
// pinning lock, authenticator, audit log (newGeneration, build.go) —
// before anything changes; only
// when all of it succeeded is it swapped in (host upstream set, then the
// router's generation), and only then are the old upstreams retired. A
// reload that fails changes nothing: the old config keeps serving.
//
// What a reload cannot change — the listeners and the session settings —
// is refused with the key named, so that an operator knows a restart is
// needed rather than believing the change took effect.

// ErrShuttingDown is returned by Reload once Shutdown has begun.
var ErrShuttingDown = errors.New("config reload refused: mcpgw is shutting down")

// ReloadFrom loads a config with load and applies it with Reload; a load
// failure (every config problem) is logged and counted as a failed reload.
func (g *Gateway) ReloadFrom(source string, load func() (*config.Config, error)) error {
	cfg, err := load()
	if err != nil {
		g.metrics.ConfigReload(false)
		g.recordReload(err, nil) // status.go
		g.log.Error("config reload failed; the running config is unchanged", zap.String("config", source), zap.Strings("problems", problemLines(err)))
		return err
	}
	return g.Reload(cfg)
}

func problemLines(err error) []string {
	var ps config.Problems
	if errors.As(err, &ps) {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.String()
		}
		return out
	}
	return strings.Split(err.Error(), "\n")
}

// Reload swaps in newCfg. It builds everything newCfg needs first and, on
// any error, changes nothing and returns the error; the result is counted
// in the config reload metrics and logged (one line).
//
// Unchanged upstreams keep running untouched; added ones start; removed or
// changed ones stop taking new calls at once, finish the calls they have
// (bounded by their timeout) and stop. Sessions survive (those whose route
// path disappeared end); policy changes apply from the next request; and
// every session and listen stream whose lists may have changed gets
// list_changed notifications.
func (g *Gateway) Reload(newCfg *config.Config) (err error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	var diff host.Diff
	defer func() {
		g.metrics.ConfigReload(err == nil)
		g.recordReload(err, &diff) // status.go
		if err != nil {
			g.log.Error("config reload failed; the running config is unchanged", zap.Strings("problems", problemLines(err)))
		}
	}()
	if g.draining.Load() {
		return ErrShuttingDown
	}
	old := g.cfg.Load()
	if err := restartOnly(old, newCfg); err != nil {
		return err
	}
	// Build everything first.
	g.red.add(newCfg.Secrets())                                                                 // before anything of the new config can log
	gen, err := newGeneration(newCfg, g.opts, modeServe, g.shared.limiterOptions(), g.gen, old) // build.go
	if err != nil {
		return err
	}
	if gen.authn != g.gen.authn { // a new one, not serving yet
		gen.authn.ShareDPoPReplay(g.shared.dpopReplay(newCfg)) // dpop.go
	}
	if gen.pol.intercept, err = buildIntercept(newCfg, g.metrics, g.log); err != nil { // intercept.go
		gen.undo.run()
		return err
	}
	// The admin token file is reread too: a rotated token takes effect.
	var adminAcc *adminAccess
	if g.adminLn != nil {
		if adminAcc, err = newAdminAccess(newCfg, g.adminLn.Addr().String()); err != nil {
			gen.undo.run()
			return err
		}
	}

	// Swap: upstreams first (new views need them), then the router; then
	// retire what nothing routes to any more.
	var retire func()
	diff, retire, err = g.host.Apply(newCfg)
	if err != nil {
		gen.undo.run()
		return fmt.Errorf("config reload: %w", err)
	}
	if keys := gen.keys; keys != nil {
		// Cannot fail: restartOnly refused a ring turned on or off, and
		// loadSessionKeys parsed it. Everything sealed with the ring is
		// rekeyed: session ids, requestStates, task ids, per-user links,
		// states and token records.
		_ = g.router.SetSessionKeys(keys)
		catalog.SetTaskKeys(g.host, keys)
		_ = g.perUser.setKeys(keys)
	}
	everything := authChanged(old, newCfg) || !reflect.DeepEqual(old.Policy, newCfg.Policy) ||
		(newCfg.Policy != nil && newCfg.Policy.Pinning != nil && newCfg.Policy.Pinning.Mode != config.PinOff)
	ended := g.router.Reload(newCfg, router.Options{Auth: gen.authn, Policy: gen.pol.policy, Limiter: gen.pol.limiter, Pinner: gen.pol.pinner, Audit: gen.audit, Intercept: gen.pol.intercept},
		diff.Touched(), everything)
	retire()

	if gen.audit != g.gen.audit {
		g.oldAudits = append(g.oldAudits, g.gen.audit) // in-flight calls may still record; closed by Shutdown
	}
	g.gen = gen
	if adminAcc != nil {
		g.adminAccess.Store(adminAcc)
	}
	g.cfg.Store(newCfg)
	warnPolicy(newCfg, g.log)
	g.log.Info("config reloaded",
		zap.Strings("added", diff.Added), zap.Strings("removed", diff.Removed), zap.Strings("changed", diff.Changed),
		zap.Int("unchanged", len(diff.Unchanged)), zap.Bool("policy_changed", !reflect.DeepEqual(old.Policy, newCfg.Policy)),
		zap.Bool("auth_changed", authChanged(old, newCfg)), zap.Bool("audit_changed", auditChanged(old, newCfg)),
		zap.Int("routes", len(newCfg.Routes)), zap.Int("sessions_ended", ended))
	return nil
}

// authChanged reports whether the downstream authenticator must be rebuilt.
func authChanged(a, b *config.Config) bool {
	return !reflect.DeepEqual(a.Auth, b.Auth) || a.PublicURL != b.PublicURL
}

// restartOnly refuses changes a reload cannot apply, naming each key.
func restartOnly(old, next *config.Config) error {
	var keys []string
	if old.Listen != next.Listen {
		keys = append(keys, fmt.Sprintf("listen (%s -> %s)", old.Listen, next.Listen))
	}
	if adminListen(old) != adminListen(next) {
		keys = append(keys, fmt.Sprintf("admin.listen (%q -> %q)", adminListen(old), adminListen(next)))
	}
	if !reflect.DeepEqual(old.TLS, next.TLS) {
		keys = append(keys, "tls") // the listener is wrapped at start; its files reload by themselves
	}
	if !reflect.DeepEqual(adminTLS(old), adminTLS(next)) {
		keys = append(keys, "admin.tls")
	}
	if old.ReadHeaderTimeout != next.ReadHeaderTimeout {
		keys = append(keys, fmt.Sprintf("read_header_timeout (%s -> %s)", old.ReadHeaderTimeout.D(), next.ReadHeaderTimeout.D()))
	}
	was, now := sessionsSection(old), sessionsSection(next)
	if was.KeyFile != now.KeyFile {
		keys = append(keys, "sessions.key_file")
	}
	if was.AdvertiseURL != now.AdvertiseURL {
		keys = append(keys, "sessions.advertise_url")
	}
	if was.IdleTimeout != now.IdleTimeout {
		keys = append(keys, "sessions.idle_timeout")
	}
	if was.DetachedTimeout != now.DetachedTimeout {
		keys = append(keys, "sessions.detached_timeout")
	}
	if old.ReplayLimits() != next.ReplayLimits() {
		keys = append(keys, "sessions.replay")
	}
	if was.MaxTasks != now.MaxTasks {
		keys = append(keys, "sessions.max_tasks")
	}
	if !reflect.DeepEqual(was.Redis, now.Redis) {
		keys = append(keys, "sessions.redis")
	}
	if !reflect.DeepEqual(old.Login, next.Login) {
		keys = append(keys, "login") // its server, keys and state are made at start
	} else if old.Login != nil && old.PublicURL != next.PublicURL {
		keys = append(keys, "public_url (the issuer of login:)")
	}
	if !reflect.DeepEqual(old.Tracing, next.Tracing) {
		keys = append(keys, "tracing") // the exporter is built at start
	}
	if old.Admin.MaxNames() != next.Admin.MaxNames() {
		keys = append(keys, "admin.max_metric_names")
	}
	if (old.Admin != nil && old.Admin.Pprof) != (next.Admin != nil && next.Admin.Pprof) {
		keys = append(keys, "admin.pprof")
	}
	keys = append(keys, perUserChanges(old, next)...) // peruser.go
	if len(keys) == 0 {
		return nil
	}
	return fmt.Errorf("config reload refused: %s cannot change on reload; restart mcpgw to apply it (or put the old value back)", strings.Join(keys, ", "))
}

func adminTLS(c *config.Config) *config.ListenerTLS {
	if c.Admin == nil {
		return nil
	}
	return c.Admin.TLS
}

func adminListen(c *config.Config) string {
	if c.Admin == nil {
		return ""
	}
	return c.Admin.Listen
}

func sessionsSection(c *config.Config) config.Sessions {
	if c.Sessions == nil {
		return config.Sessions{}
	}
	return *c.Sessions
}

// Config returns the config in force.
func (g *Gateway) Config() *config.Config { return g.cfg.Load() }
