package metrics

import "github.com/prometheus/client_golang/prometheus"

// Redis is the metrics of sessions.redis, the state a fleet of replicas
// shares: registered only when Redis is configured (NewRedis).
type Redis struct {
	queue   prometheus.Gauge
	dropped *prometheus.CounterVec
	errors  *prometheus.CounterVec
}

// What a Redis copy dropped (RedisDropped) and the operations that fail
// (RedisError).
const (
	RedisDroppedQueueFull = "queue_full"
	RedisDroppedBroken    = "stream_broken"
	RedisOpAppend         = "append"
	RedisOpReplay         = "replay"
	RedisOpRevoke         = "revoke"
	RedisOpRevoked        = "revoked_check"
)

// NewRedis registers the Redis metrics on m's registry (nil m: a Redis
// that counts nothing). Call it once per registry.
func (m *Metrics) NewRedis() *Redis {
	if m == nil {
		return nil
	}
	f := factory{m.reg}
	return &Redis{
		queue: f.gauge("redis_queue",
			"Events waiting to be copied to Redis (bounded by sessions.redis.queue)."),
		dropped: f.counterVec("redis_dropped_total",
			"Events not copied to Redis, by reason (queue_full: Redis slow or down; stream_broken: an earlier event of the stream was lost). Their streams resume on this replica only; another replica answers events purged.",
			"reason"),
		errors: f.counterVec("redis_errors_total",
			"Redis commands that failed, by operation (append, replay, revoke, revoked_check).",
			"op"),
	}
}

// RedisQueue sets the events waiting to be copied.
func (r *Redis) RedisQueue(n int) {
	if r != nil {
		r.queue.Set(float64(n))
	}
}

// RedisDropped counts n events not copied, by reason (RedisDropped*).
func (r *Redis) RedisDropped(reason string, n int) {
	if r != nil {
		r.dropped.WithLabelValues(reason).Add(float64(n))
	}
}

// RedisError counts a failed Redis operation (RedisOp*).
func (r *Redis) RedisError(op string) {
	if r != nil {
		r.errors.WithLabelValues(op).Inc()
	}
}
