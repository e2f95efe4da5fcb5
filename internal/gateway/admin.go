package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/tlsconf"
)

// The admin listener serves operators and their tools, never MCP clients:
//
//	GET /metrics            Prometheus exposition of the gateway's registry
//	GET /healthz            200 while the process is alive and serving HTTP
//	GET /readyz             200 when the gateway should get traffic, else 503,
//	                        with a JSON report: config loaded, MCP listener up,
//	                        every upstream marked required: true ready, not
//	                        shutting down
//	GET /                   the status page: HTML, no scripts or external
//	                        assets (status.go, status.html)
//	GET /status/upstreams   the upstreams, JSON
//	GET /status/catalog     a route's merged catalog (?route=PATH), JSON
//	GET /status/reloads     the reload history, JSON
//	GET /status/config      the config in force, YAML, secrets redacted
//	GET /debug/pprof/       Go's profiles, only with admin.pprof: true
//
// It is off unless admin.listen is configured (or Options.AdminListener is
// given), and it is the last thing Shutdown closes, so probes see /readyz
// turn 503 while the gateway drains. Everything is read-only. Every
// request passes Host and cross-site checks, and with admin.token_file all
// but the probes (and /metrics) need a token (adminaccess.go).

//go:embed status.html
var statusHTML string

var statusPage = template.Must(template.New("status").Parse(statusHTML))

// listenAdmin opens the admin listener, if any.
func (g *Gateway) listenAdmin() error {
	ln := g.opts.AdminListener
	if ln == nil {
		cfg := g.cfg.Load()
		if cfg.Admin == nil || cfg.Admin.Listen == "" {
			return nil
		}
		var err error
		if ln, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
			return fmt.Errorf("admin listener %s: %w (change admin.listen:, or remove admin: to run without it)", cfg.Admin.Listen, err)
		}
	}
	acc, err := newAdminAccess(g.cfg.Load(), ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		return err
	}
	if cfg := g.cfg.Load(); cfg.Admin != nil && cfg.Admin.TLS != nil {
		st, err := tlsconf.NewServer("admin.tls", cfg.Admin.TLS, tlsconf.Options{Logger: g.log})
		if err != nil {
			_ = ln.Close()
			return err
		}
		ln = tls.NewListener(ln, st.Config())
	}
	g.adminAccess.Store(acc)
	g.adminLn = ln
	g.admin = &http.Server{
		Handler:           g.AdminHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          zap.NewStdLog(g.log.Named("admin")),
	}
	return nil
}

func (g *Gateway) serveAdmin() {
	if g.admin == nil {
		return
	}
	g.log.Info("serving admin endpoints", zap.String("url", g.adminScheme()+"://"+g.adminLn.Addr().String()), zap.Strings("paths", []string{"/", "/status/...", "/metrics", "/healthz", "/readyz"}), zap.Bool("pprof", g.cfg.Load().Admin != nil && g.cfg.Load().Admin.Pprof), zap.Bool("token", g.adminAccess.Load().token != nil))
	go func() {
		if err := g.admin.Serve(g.adminLn); err != nil && err != http.ErrServerClosed {
			g.log.Error("admin listener failed", zap.Error(err))
		}
	}()
}

func (g *Gateway) closeAdmin() {
	if g.admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := g.admin.Shutdown(ctx); err != nil {
		_ = g.admin.Close()
	}
}

// AdminAddr is the admin listener's address, or nil when it is off.
func (g *Gateway) AdminAddr() net.Addr {
	if g.adminLn == nil {
		return nil
	}
	return g.adminLn.Addr()
}

// UpstreamReadiness is one upstream's line in the /readyz report.
type UpstreamReadiness struct {
	State    string `json:"state"`
	Required bool   `json:"required,omitempty"`
	Error    string `json:"error,omitempty"`
	// RetryAt is the next attempt while the crash-loop breaker is open.
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// Readiness is the /readyz report.
type Readiness struct {
	Ready        bool                         `json:"ready"`
	ShuttingDown bool                         `json:"shutting_down,omitempty"`
	ConfigLoaded bool                         `json:"config_loaded"`
	Listener     bool                         `json:"listener"`
	Upstreams    map[string]UpstreamReadiness `json:"upstreams"`
	// Redis is sessions.redis' state: "degraded" while it does not
	// answer, which never makes the replica not ready.
	Redis *RedisReadiness `json:"redis,omitempty"`
	// Reasons say why the gateway is not ready.
	Reasons []string `json:"reasons,omitempty"`
}

// Readiness reports whether the gateway should get traffic, and why not.
func (g *Gateway) Readiness() Readiness {
	r := Readiness{ConfigLoaded: g.cfg.Load() != nil, Listener: g.listening.Load(), ShuttingDown: g.draining.Load(), Upstreams: map[string]UpstreamReadiness{}}
	if r.ShuttingDown {
		r.Reasons = append(r.Reasons, "shutting down")
	}
	if !r.Listener {
		r.Reasons = append(r.Reasons, "the MCP listener is not serving")
	}
	for _, name := range g.host.Names() {
		u := g.host.Upstream(name)
		s, err := u.State()
		ur := UpstreamReadiness{State: string(s), Required: u.Required()}
		if err != nil {
			ur.Error = err.Error()
		}
		if at := u.RetryAt(); !at.IsZero() {
			ur.RetryAt = &at
		}
		if ur.Required && s != host.StateReady {
			r.Reasons = append(r.Reasons, fmt.Sprintf("required upstream %q is %s", name, s))
		}
		r.Upstreams[name] = ur
	}
	r.Redis = g.shared.readiness()
	r.Ready = len(r.Reasons) == 0
	return r
}

// AdminHandler serves the admin endpoints.
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", g.metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		rep := g.Readiness()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !rep.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
	mux.HandleFunc("GET /{$}", g.serveStatusPage)
	mux.HandleFunc("GET /status", g.serveStatusPage)
	mux.HandleFunc("GET /status/upstreams", func(w http.ResponseWriter, _ *http.Request) {
		writeAdminJSON(w, http.StatusOK, g.UpstreamStatuses())
	})
	mux.HandleFunc("GET /status/reloads", func(w http.ResponseWriter, _ *http.Request) {
		writeAdminJSON(w, http.StatusOK, g.reloads.list())
	})
	mux.HandleFunc("GET /status/catalog", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), catalogTimeout)
		defer cancel()
		c, err := g.Catalog(ctx, r.URL.Query().Get("route"))
		var nr *ErrNoRoute
		if errors.As(err, &nr) {
			http.Error(w, "mcpgw admin: "+err.Error()+"; ask /status/catalog?route=PATH", http.StatusNotFound)
			return
		}
		writeAdminJSON(w, http.StatusOK, c)
	})
	mux.HandleFunc("GET /status/config", g.serveConfig)
	if cfg := g.cfg.Load(); cfg.Admin != nil && cfg.Admin.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		hint := "try /, /status/upstreams, /status/catalog, /status/config, /metrics, /healthz or /readyz (MCP is served on the main listener)"
		if strings.HasPrefix(r.URL.Path, "/debug/pprof") {
			hint = "profiles are off; set admin.pprof: true to serve /debug/pprof/"
		}
		http.Error(w, "mcpgw admin: no such endpoint "+r.URL.Path+"; "+hint, http.StatusNotFound)
	})
	return g.guardAdmin(mux)
}

func (g *Gateway) serveStatusPage(w http.ResponseWriter, r *http.Request) {
	st := g.Status(r.Context())
	var buf bytes.Buffer
	if err := statusPage.Execute(&buf, st); err != nil {
		http.Error(w, "mcpgw admin: status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Nothing to load from anywhere: no scripts, no external assets.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(buf.Bytes())
}

// serveConfig shows the config in force as YAML that validate accepts
// (config.ShowYAML): secrets replaced by [redacted] by type, and any secret
// that still shows (inside a command line, say) scrubbed like a log line.
func (g *Gateway) serveConfig(w http.ResponseWriter, _ *http.Request) {
	b, err := g.cfg.Load().ShowYAML()
	if err != nil {
		http.Error(w, "mcpgw admin: config: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("# the config in force, secrets redacted\n" + g.red.scrub(string(b))))
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// adminScheme is how the admin listener is reached: https with admin.tls.
func (g *Gateway) adminScheme() string {
	if cfg := g.cfg.Load(); cfg.Admin != nil && cfg.Admin.TLS != nil {
		return "https"
	}
	return "http"
}
