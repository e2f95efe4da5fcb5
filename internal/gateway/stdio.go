package gateway

import (
	"context"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router"
)

// ServeStdio runs mcpgw as a stdio MCP server, for hosts that only launch
// stdio servers: the host (upstream clients and catalog) is built from cfg
// as for Start, and one session of the route at routePath ("" for the first
// route) is served over r and w (newline-delimited JSON-RPC). No listener is
// opened. It returns when r reaches EOF and every request read has been
// answered, or when ctx ends; the upstreams are stopped before it returns.
// Logs go to opts.Logger only, never to w.
func ServeStdio(ctx context.Context, cfg *config.Config, opts Options, routePath string, r io.Reader, w io.Writer) error {
	if routePath != "" && !hasRoute(cfg, routePath) {
		paths := make([]string, 0, len(cfg.Routes))
		for _, rc := range cfg.Routes {
			paths = append(paths, rc.Path)
		}
		return fmt.Errorf("no route %q in the config; configured routes: %s", routePath, strings.Join(paths, ", "))
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	pol, err := buildPolicy(cfg)
	if err != nil {
		return err
	}
	if pol.intercept, err = buildIntercept(cfg, nil, opts.Logger); err != nil { // intercept.go
		return err
	}
	if cfg.Audit != nil && cfg.Audit.Output == config.AuditStdout {
		return fmt.Errorf("audit.output: stdout carries the MCP messages in stdio mode; set audit.output to stderr or a file path")
	}
	aud, err := openAudit(cfg, opts.Logger) // audit.go
	if err != nil {
		return err
	}
	defer func() { _ = aud.Close() }()
	tp, tracer, err := startTracing(cfg, opts, nil) // tracing.go
	if err != nil {
		return err
	}
	defer stopTracing(tp, opts.Logger)
	// The same wiring as Start: upstream events reach the router once it exists.
	wire := newWiring()
	h := host.New(cfg, wire.hostOptions(host.Options{
		Logger:     opts.Logger.Named("host"),
		ClientInfo: mcp.Implementation{Name: "mcpgw", Version: opts.Version},
		MaxTasks:   sessionsSection(cfg).MaxTasks,
	}))
	rt := router.New(cfg, h, router.Options{
		Logger:     opts.Logger.Named("router"),
		ServerInfo: mcp.Implementation{Name: "mcpgw", Version: opts.Version},
		Policy:     pol.policy,
		Limiter:    pol.limiter,
		Pinner:     pol.pinner,
		Audit:      aud,
		Intercept:  pol.intercept,
		Tracer:     tracer,
	})
	wire.connect(h, rt)
	h.Start()
	err = rt.ServeStdio(ctx, r, w, routePath)
	rt.Close()
	h.Close()
	return err
}

func hasRoute(cfg *config.Config, path string) bool {
	for _, rc := range cfg.Routes {
		if rc.Path == path {
			return true
		}
	}
	return false
}
