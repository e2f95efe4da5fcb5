package gateway

import (
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
)

// dpopReplay is the fleet's DPoP replay store (sessions.redis), so a proof
// used on one replica is refused on every other; nil without Redis (each
// replica keeps its own cache).
func (s *shared) dpopReplay(cfg *config.Config) auth.ReplayStore {
	if s == nil || s.client == nil || cfg.Sessions == nil || cfg.Sessions.Redis == nil {
		return nil
	}
	prefix := cfg.Sessions.Redis.KeyPrefix
	if prefix == "" {
		prefix = config.DefaultRedisKeyPrefix
	}
	return auth.NewRedisReplay(s.client, prefix)
}
