package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcpgw/mcpgw/internal/router/core"
)

// ServeStdio serves one session of the route at routePath ("" for the
// first route) over the MCP stdio transport (serial.Transport.ServeStdio
// says how).
func (rt *Router) ServeStdio(ctx context.Context, r io.Reader, w io.Writer, routePath string) error {
	rte, err := rt.stdioRoute(routePath)
	if err != nil {
		return err
	}
	return rt.serial.ServeStdio(ctx, r, w, rte)
}

// stdioRoute finds the route ServeStdio serves.
func (rt *Router) stdioRoute(path string) (*core.Route, error) {
	routes := rt.current().Routes
	if len(routes) == 0 {
		return nil, errors.New("mcpgw: no routes configured")
	}
	if path == "" {
		return routes[0], nil
	}
	paths := make([]string, len(routes))
	for i, r := range routes {
		if r.Path == path {
			return r, nil
		}
		paths[i] = r.Path
	}
	return nil, fmt.Errorf("mcpgw: no route %q; configured routes: %s", path, strings.Join(paths, ", "))
}
