package auth

// The DPoP replay cache shared by the fleet: with sessions.redis every
// replica records each proof's jti there (SET NX with the proof's life as
// TTL), so a proof used on one replica is refused on every other. Without
// it each replica keeps its own bounded cache (dpop.go).

import (
	"context"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplayStore records DPoP proofs fleet-wide.
type ReplayStore interface {
	// Remember records id until until and reports whether it was new;
	// an error means it could not be checked (the proof is then refused).
	Remember(ctx context.Context, id string, until time.Time) (bool, error)
}

// ShareDPoPReplay makes the authenticator record DPoP proofs in s instead
// of its own cache (nil: its own). Call it before the authenticator
// serves.
func (a *Authenticator) ShareDPoPReplay(s ReplayStore) {
	if a != nil && a.dpop != nil {
		a.dpop.shared = s
	}
}

// RedisReplay is a ReplayStore in Redis.
type RedisReplay struct {
	c      redis.UniversalClient
	prefix string
}

// NewRedisReplay keeps proofs under keyPrefix.
func NewRedisReplay(c redis.UniversalClient, keyPrefix string) *RedisReplay {
	return &RedisReplay{c: c, prefix: keyPrefix + "dpop:jti:"}
}

// Remember implements ReplayStore.
func (r *RedisReplay) Remember(ctx context.Context, id string, until time.Time) (bool, error) {
	ttl := time.Until(until)
	if ttl < time.Second {
		ttl = time.Second
	}
	return r.c.SetNX(ctx, r.prefix+hex.EncodeToString([]byte(id)), 1, ttl).Result()
}
