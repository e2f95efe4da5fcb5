package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// With sessions.redis, the rate buckets of policy.rate_limits (principal,
// tool, upstream rate) are shared by every replica: a limit of N calls/s
// holds for the fleet, not N per replica. The per-upstream concurrency cap
// stays per replica (a slot is held for a call's life; a crashed replica
// would leak shared ones).
//
// The shared buckets are GCRA (the generic cell rate algorithm): one
// number per bucket, its theoretical arrival time, checked and advanced for
// every bucket of a call in one Lua script, so either every bucket gives a
// token or none is spent, with Redis' own clock (replicas' clocks may
// differ). When Redis cannot answer within its timeout the Limiter decides
// with the replica's own buckets (per-replica limits, counted by the
// fallback hook) rather than refusing or waiting.

// SharedBucket is one bucket a call takes a token from.
type SharedBucket struct {
	Key string
	// Interval is the time one token takes to refill (1/rate).
	Interval time.Duration
	Burst    int
}

// SharedBuckets take tokens from buckets every replica shares.
type SharedBuckets interface {
	// Take takes one token from each bucket, all or none. When refused,
	// refused is the index of a bucket that refused and retry when it
	// will give a token.
	Take(ctx context.Context, buckets []SharedBucket) (allowed bool, refused int, retry time.Duration, err error)
}

// WithShared makes the Limiter's rate buckets the fleet's (sb), asked
// within timeout; fallback is called (with the error) for every decision
// taken with the local buckets instead.
func WithShared(sb SharedBuckets, timeout time.Duration, fallback func(error)) LimiterOption {
	return func(l *Limiter) {
		l.shared, l.sharedTimeout, l.fallback = sb, timeout, fallback
	}
}

// gcraScript: KEYS are the buckets; ARGV holds, per bucket, its interval
// and burst in microseconds and tokens. It returns {0, 0} when every
// bucket gave a token, else {i, wait µs} for the first bucket i (1-based)
// that refused, spending nothing.
const gcraScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tats = {}
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2*i-1])
  local burst = tonumber(ARGV[2*i])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local new = tat + interval
  local allow_at = new - burst * interval
  if allow_at > now then
    return {i, allow_at - now}
  end
  tats[i] = new
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%.0f', tats[i]), 'PX', math.ceil((tats[i] - now) / 1000) + 1000)
end
return {0, 0}
`

// RedisBuckets are SharedBuckets in Redis: one key per bucket,
// "<prefix>{rl}:<h>" (h: a hash of the bucket's name, so no principal is
// written to Redis; one hash tag, so a call's buckets share a Cluster
// slot), expiring once the bucket would be full again.
type RedisBuckets struct {
	client redis.UniversalClient
	prefix string
	script *redis.Script
}

// NewRedisBuckets makes the shared buckets over client.
func NewRedisBuckets(client redis.UniversalClient, prefix string) *RedisBuckets {
	return &RedisBuckets{client: client, prefix: prefix, script: redis.NewScript(gcraScript)}
}

// Take implements SharedBuckets.
func (r *RedisBuckets) Take(ctx context.Context, buckets []SharedBucket) (bool, int, time.Duration, error) {
	keys := make([]string, len(buckets))
	args := make([]any, 0, 2*len(buckets))
	for i, b := range buckets {
		h := sha256.Sum256([]byte(b.Key))
		keys[i] = r.prefix + "{rl}:" + hex.EncodeToString(h[:16])
		args = append(args, strconv.FormatInt(b.Interval.Microseconds(), 10), strconv.Itoa(b.Burst))
	}
	res, err := r.script.Run(ctx, r.client, keys, args...).Int64Slice()
	if err != nil {
		return false, 0, 0, err
	}
	if len(res) != 2 {
		return false, 0, 0, errors.New("rate-limit script: unexpected answer")
	}
	if res[0] == 0 {
		return true, 0, 0, nil
	}
	return false, int(res[0]) - 1, time.Duration(res[1]) * time.Microsecond, nil
}
