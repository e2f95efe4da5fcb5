package peruser

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Once remembers the start links and states already used, until they
// would have expired anyway, so each works once (a replayed one is
// refused).
type Once interface {
	// Use marks id used until until and reports whether it was unused.
	Use(ctx context.Context, id string, until time.Time) (bool, error)
}

// errOnceFull refuses a link when the memory of used ones is full: better
// than forgetting one that could then be replayed.
var errOnceFull = errors.New("too many authorizations are under way at once (the gateway remembers at most 100000 used links for their lifetime); retry in a few minutes")

// maxUsed bounds MemoryOnce.
const maxUsed = 100000

// MemoryOnce is a replica's own Once, bounded.
type MemoryOnce struct {
	clock func() time.Time
	max   int
	mu    sync.Mutex
	used  map[string]time.Time
}

// NewMemoryOnce returns an empty MemoryOnce.
func NewMemoryOnce(clock func() time.Time) *MemoryOnce {
	if clock == nil {
		clock = time.Now
	}
	return &MemoryOnce{clock: clock, max: maxUsed, used: map[string]time.Time{}}
}

// Use implements Once.
func (m *MemoryOnce) Use(_ context.Context, id string, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	if t, ok := m.used[id]; ok && now.Before(t) {
		return false, nil
	}
	if len(m.used) >= m.max {
		for k, t := range m.used {
			if !now.Before(t) {
				delete(m.used, k)
			}
		}
		if len(m.used) >= m.max {
			return false, errOnceFull
		}
	}
	m.used[id] = until
	return true, nil
}

// RedisOnce is the fleet's Once: a link used on one replica is refused
// on every other.
type RedisOnce struct {
	c      redis.UniversalClient
	prefix string
}

// NewRedisOnce keeps used ids under keyPrefix.
func NewRedisOnce(c redis.UniversalClient, keyPrefix string) *RedisOnce {
	return &RedisOnce{c: c, prefix: keyPrefix + "peruser:used:"}
}

// Use implements Once.
func (r *RedisOnce) Use(ctx context.Context, id string, until time.Time) (bool, error) {
	ttl := time.Until(until)
	if ttl < time.Second {
		ttl = time.Second
	}
	return r.c.SetNX(ctx, r.prefix+id, 1, ttl).Result()
}
