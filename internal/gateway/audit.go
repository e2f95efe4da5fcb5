package gateway

import (
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/config"
)

// openAudit opens the audit log of the audit: section (nil when there is
// none). The caller closes it after the router and the host have stopped,
// so that the last calls' records are written.
func openAudit(cfg *config.Config, log *zap.Logger) (*audit.Logger, error) {
	a, err := audit.Open(cfg.Audit)
	if err != nil || a == nil {
		return nil, err
	}
	log.Info("audit log on", zap.String("output", cfg.Audit.Output),
		zap.Bool("include_arguments", cfg.Audit.IncludeArguments), zap.Strings("redact_fields", cfg.Audit.RedactFields))
	return a, nil
}
