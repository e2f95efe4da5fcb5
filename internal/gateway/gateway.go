// Package gateway assembles one running mcpgw: the host (upstream clients
// and catalog), the router (downstream endpoint) and the MCP listener, and
// owns their start and orderly stop.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router"
)

// Options configure a Gateway.
type Options struct {
	Logger  *zap.Logger
	Version string
	// Listener, when set, is used instead of listening on cfg.Listen (tests).
	Listener net.Listener
}

// Gateway is one running mcpgw.
type Gateway struct {
	log    *zap.Logger
	cfg    *config.Config
	host   *host.Host
	router *router.Router
	srv    *http.Server
	ln     net.Listener

	serveErr chan error
	stopOnce sync.Once
}

// Start builds the gateway for cfg, connects its upstreams in the
// background and starts serving.
func Start(cfg *config.Config, opts Options) (*Gateway, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	g := &Gateway{log: opts.Logger, cfg: cfg, serveErr: make(chan error, 1)}
	var rt *router.Router
	var rtReady sync.WaitGroup
	rtReady.Add(1)
	g.host = host.New(cfg, host.Options{
		Logger:     opts.Logger.Named("host"),
		ClientInfo: mcp.Implementation{Name: "mcpgw", Version: opts.Version},
		OnNotification: func(upstream, method string, params json.RawMessage) {
			rtReady.Wait()
			if method == mcp.NotificationToolsListChanged {
				g.host.InvalidateTools(upstream)
			}
			rt.UpstreamNotification(upstream, method, params)
		},
		OnStateChange: func(upstream string, s host.State) {
			rtReady.Wait()
			// An upstream coming or going changes what every list holds.
			if s == host.StateReady || s == host.StateDown {
				rt.ListChanged(upstream, mcp.NotificationToolsListChanged)
				rt.ListChanged(upstream, mcp.NotificationPromptsChanged)
				rt.ListChanged(upstream, mcp.NotificationResourcesChanged)
			}
		},
	})
	idle := time.Duration(0)
	if cfg.Sessions != nil {
		idle = cfg.Sessions.IdleTimeout.D()
	}
	rt = router.New(cfg, g.host, router.Options{
		Logger:      opts.Logger.Named("router"),
		ServerInfo:  mcp.Implementation{Name: "mcpgw", Version: opts.Version},
		IdleTimeout: idle,
	})
	rtReady.Done()
	g.router = rt

	ln := opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			rt.Close()
			return nil, fmt.Errorf("listen %s: %w (is another mcpgw running? change listen:)", cfg.Listen, err)
		}
	}
	g.ln = ln
	g.srv = &http.Server{
		Handler:           rt,
		ReadHeaderTimeout: 10 * time.Second,
		// No ReadTimeout/WriteTimeout: SSE streams live long. Bodies are
		// bounded by max_body_bytes and idle keep-alives by IdleTimeout.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       zap.NewStdLog(opts.Logger.Named("http")),
	}
	g.host.Start()
	go func() { g.serveErr <- g.srv.Serve(ln) }()
	return g, nil
}

// Addr is the MCP listener's address.
func (g *Gateway) Addr() net.Addr { return g.ln.Addr() }

// Host returns the gateway's host (for tests and admin).
func (g *Gateway) Host() *host.Host { return g.host }

// Err returns a channel that yields if the listener fails.
func (g *Gateway) Err() <-chan error { return g.serveErr }

// Shutdown stops accepting requests, ends sessions and their streams, waits
// for in-flight requests up to ctx, then stops every upstream.
func (g *Gateway) Shutdown(ctx context.Context) error {
	var err error
	g.stopOnce.Do(func() {
		g.srv.SetKeepAlivesEnabled(false)
		// End GET streams first: they would otherwise keep Shutdown
		// waiting until ctx expires. In-flight calls go on.
		g.router.Drain()
		if e := g.srv.Shutdown(ctx); e != nil && !errors.Is(e, http.ErrServerClosed) {
			err = e
			_ = g.srv.Close()
		}
		g.router.Close()
		g.host.Close()
	})
	return err
}
