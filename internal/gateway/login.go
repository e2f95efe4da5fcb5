package gateway

import (
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/login"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// newLogin builds the gateway's authorization server of login: (nil when
// it is not configured), keeping its keys and state in the state
// directory. A reload keeps it: only its routes follow the new config.
func newLogin(cfg *config.Config, opts Options, m *metrics.Metrics) (*login.Server, error) {
	if cfg.Login == nil {
		return nil, nil
	}
	lo := login.Options{Logger: opts.Logger.Named("login"), StateDir: opts.StateDir, Now: opts.Now}
	if m != nil {
		lo.Registerer = m.Registry()
	}
	return login.New(cfg, lo)
}
