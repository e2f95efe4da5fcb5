package gateway

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/intercept"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// buildIntercept compiles the interceptors: section (nil when there is
// none, and the routes have no interceptor stage). One that cannot be
// built stops the gateway (or the reload) rather than serving without it.
func buildIntercept(cfg *config.Config, m *metrics.Metrics, log *zap.Logger) (*intercept.Set, error) {
	opts := intercept.Options{Logger: log.Named("intercept")}
	if m != nil {
		opts.Metrics = m // a nil *Metrics in the interface would not be nil
	}
	set, err := intercept.New(cfg.Interceptors, opts)
	if err != nil {
		return nil, fmt.Errorf("interceptors: %w", err)
	}
	return set, nil
}
