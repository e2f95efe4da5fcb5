package gateway

import (
	"context"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
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
	b, err := build(cfg, opts, modeStdio, nil, nil) // build.go
	if err != nil {
		return err
	}
	defer b.undo.run() // the router, the upstreams, the exporter, the audit log
	b.host.Start()
	return b.router.ServeStdio(ctx, r, w, routePath)
}

func hasRoute(cfg *config.Config, path string) bool {
	for _, rc := range cfg.Routes {
		if rc.Path == path {
			return true
		}
	}
	return false
}
