package peruser

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisBackend keeps records in Redis (sessions.redis), shared by every
// replica: one string per record, expiring with the record (the refresh
// token's lifetime when known), and a set indexing the upstream's keys for
// the bound and for revoking all. The bound is checked before a new
// record is written, so replicas writing at the same instant may pass it
// by a few; it still bounds growth.
type RedisBackend struct {
	c        redis.UniversalClient
	prefix   string // <key_prefix>peruser:<upstream>:
	max      int
	deleteIf *redis.Script
}

// deleteIfScript deletes KEYS[1] (and its index member ARGV[2] of
// KEYS[2]) only if it holds ARGV[1]: one atomic step, so no replica's
// write can fall between the comparison and the delete. Both keys share
// the upstream's hash tag (one cluster slot).
const deleteIfScript = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[2])
  return 1
end
return 0`

// NewRedis keeps upstream's records under keyPrefix (sessions.redis.key_prefix).
func NewRedis(c redis.UniversalClient, keyPrefix, upstream string, max int) *RedisBackend {
	return &RedisBackend{c: c, prefix: keyPrefix + "peruser:{" + upstream + "}:", max: max, deleteIf: redis.NewScript(deleteIfScript)}
}

// DeleteIf implements Backend.
func (r *RedisBackend) DeleteIf(ctx context.Context, key string, val []byte) (bool, error) {
	n, err := r.deleteIf.Run(ctx, r.c, []string{r.prefix + key, r.index()}, val, key).Int()
	return n == 1, err
}

func (r *RedisBackend) index() string { return r.prefix + "index" }

// Get implements Backend.
func (r *RedisBackend) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, err := r.c.Get(ctx, r.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// Put implements Backend.
func (r *RedisBackend) Put(ctx context.Context, key string, val []byte, expires time.Time) error {
	held, err := r.c.SIsMember(ctx, r.index(), key).Result()
	if err != nil {
		return err
	}
	if !held {
		n, err := r.c.SCard(ctx, r.index()).Result()
		if err == nil && n >= int64(r.max) {
			n, err = r.prune(ctx) // only when full: members of expired records go
		}
		if err != nil {
			return err
		}
		if n >= int64(r.max) {
			return ErrFull
		}
	}
	ttl := time.Duration(0)
	if !expires.IsZero() {
		if ttl = time.Until(expires); ttl <= 0 {
			return nil // already useless
		}
	}
	_, err = r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, r.prefix+key, val, ttl)
		p.SAdd(ctx, r.index(), key)
		return nil
	})
	return err
}

// Delete implements Backend.
func (r *RedisBackend) Delete(ctx context.Context, key string) (bool, error) {
	var del *redis.IntCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.Del(ctx, r.prefix+key)
		p.SRem(ctx, r.index(), key)
		return nil
	})
	if err != nil {
		return false, err
	}
	return del.Val() > 0, nil
}

// Clear implements Backend.
func (r *RedisBackend) Clear(ctx context.Context) (int, error) {
	keys, err := r.c.SMembers(ctx, r.index()).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		ok, err := r.Delete(ctx, k)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// Len implements Backend: the indexed keys (some records may have
// expired since; prune drops them).
func (r *RedisBackend) Len(ctx context.Context) (int, error) {
	n, err := r.c.SCard(ctx, r.index()).Result()
	return int(n), err
}

// prune drops the index members whose records expired and returns how
// many are left.
func (r *RedisBackend) prune(ctx context.Context) (int64, error) {
	keys, err := r.c.SMembers(ctx, r.index()).Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, k := range keys {
		exists, err := r.c.Exists(ctx, r.prefix+k).Result()
		if err != nil {
			return 0, err
		}
		if exists == 0 {
			r.c.SRem(ctx, r.index(), k)
			continue
		}
		n++
	}
	return n, nil
}
