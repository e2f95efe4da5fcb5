package host

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// watch waits while a connection is healthy and returns why it no longer
// is: it failed, ctx ended (nil), or — for an HTTP upstream, whose dead
// server only shows when asked — HealthFailures probes in a row got no
// answer, and the upstream is ejected.
func (u *Upstream) watch(ctx context.Context, c *client.Client) error {
	if u.cfg.URL == "" {
		select {
		case <-ctx.Done():
			return nil
		case <-c.Done():
			return c.Err()
		}
	}
	opts := u.host.opts
	tick := time.NewTicker(opts.HealthInterval)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.Done():
			return c.Err()
		case <-tick.C:
		}
		err := u.probe(ctx, c)
		if err == nil {
			failures = 0
			continue
		}
		failures++
		u.log.Warn("upstream health probe failed", zap.Error(err), zap.Int("consecutive", failures), zap.Int("eject_after", opts.HealthFailures))
		if failures >= opts.HealthFailures {
			_ = c.Close()
			return fmt.Errorf("ejected after %d failed health probes: %w", failures, err)
		}
	}
}

// probe asks the upstream something cheap: ping, or server/discover for a
// 2026-07-28 upstream (which has no ping). Any answer, even an error
// response, shows the upstream is alive.
func (u *Upstream) probe(ctx context.Context, c *client.Client) error {
	pctx, cancel := context.WithTimeout(ctx, u.host.opts.HealthTimeout)
	defer cancel()
	method, params := mcp.MethodPing, []byte(nil)
	if c.Modern() {
		method, params = mcp.MethodServerDiscover, []byte(`{}`)
	}
	_, err := c.Call(pctx, method, params, client.CallOptions{})
	return err
}
