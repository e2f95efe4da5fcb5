package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/host"
)

// The admin listener serves operators and their tools, never MCP clients:
//
//	GET /metrics  Prometheus exposition of the gateway's registry
//	GET /healthz  200 while the process is alive and serving HTTP
//	GET /readyz   200 when the gateway should get traffic, else 503, with a
//	              JSON report: config loaded, MCP listener up, every
//	              upstream marked required: true ready, not shutting down
//
// It is off unless admin.listen is configured (or Options.AdminListener is
// given), and it is the last thing Shutdown closes, so probes see /readyz
// turn 503 while the gateway drains.

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
	g.log.Info("serving admin endpoints", zap.String("url", "http://"+g.adminLn.Addr().String()), zap.Strings("paths", []string{"/metrics", "/healthz", "/readyz"}))
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
	r.Ready = len(r.Reasons) == 0
	return r
}

// AdminHandler serves /metrics, /healthz and /readyz.
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
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "mcpgw admin: no such endpoint "+r.URL.Path+"; try /metrics, /healthz or /readyz (MCP is served on the main listener)", http.StatusNotFound)
	})
	return mux
}
