package gateway

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
)

// UpstreamTools is what ListTools found of one upstream.
type UpstreamTools struct {
	Name  string
	Tools [][]byte // every tool, as the upstream sent it
	Err   error    // the upstream could not be listed
}

// ListTools builds cfg's upstreams alone (build's modePin: no router, no
// listener), lists every upstream's tools (catalog.UpstreamTools) and
// stops them again before it returns: what `mcpgw pin` approves. Every
// upstream is listed at once and waited for on its own (each waits for its
// first connection), so one that hangs costs ctx's deadline once and fails
// alone. The answer is in host.Names order.
func ListTools(ctx context.Context, cfg *config.Config, opts Options) ([]UpstreamTools, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	b, err := build(cfg, opts, modePin, nil, nil) // build.go
	if err != nil {
		return nil, err
	}
	b.host.Start()
	names := b.host.Names()
	out := make([]UpstreamTools, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		out[i].Name = name
		wg.Go(func() { out[i].Tools, out[i].Err = catalog.UpstreamTools(ctx, b.host.Upstream(name)) })
	}
	wg.Wait()
	// Stopped before the caller writes its report: the supervisors log
	// their retries until then.
	b.undo.run()
	return out, nil
}
