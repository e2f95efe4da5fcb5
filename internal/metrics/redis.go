package metrics

import "github.com/prometheus/client_golang/prometheus"

// Redis is the metrics of sessions.redis, the state a fleet of replicas
// shares: registered only when Redis is configured (NewRedis).
type Redis struct {
	queue    prometheus.Gauge
	dropped  *prometheus.CounterVec
	errors   *prometheus.CounterVec
	up       prometheus.Gauge
	relayed  *prometheus.CounterVec
	fallback prometheus.Counter
}

// What a Redis copy dropped (RedisDropped) and the operations that fail
// (RedisError).
const (
	RedisDroppedQueueFull = "queue_full"
	RedisDroppedBroken    = "stream_broken"
	// RedisDroppedUpstreamRecord: a stateful upstream's session record
	// over the size a fleet shares (the session stays one replica's).
	RedisDroppedUpstreamRecord = "upstream_record_too_large"
	RedisOpAppend              = "append"
	RedisOpReplay              = "replay"
	RedisOpRevoke              = "revoke"
	RedisOpRevoked             = "revoked_check"
	RedisOpRelay               = "relay"
	RedisOpRateLimit           = "rate_limit"
	RedisOpSubscription        = "subscription"
	// RedisOpUpstreamSession: a stateful upstream's session record
	// (read, written, refreshed or removed) for the fleet.
	RedisOpUpstreamSession = "upstream_session"
)

// What became of a server→client message relayed to the replica holding
// its session's GET stream (RedisRelayed).
const (
	RedisRelayDelivered = "delivered"  // published and a replica holds the stream
	RedisRelayNoStream  = "no_stream"  // published, but no replica holds a stream
	RedisRelayDropped   = "queue_full" // Redis slow or down: not published
	RedisRelayFailed    = "failed"     // Redis refused the publish
)

// NewRedis registers the Redis metrics on m's registry (nil m: a Redis
// that counts nothing). Call it once per registry.
func (m *Metrics) NewRedis() *Redis {
	if m == nil {
		return nil
	}
	f := factory{m.reg}
	r := &Redis{
		queue: f.gauge("redis_queue",
			"Events waiting to be copied to Redis (bounded by sessions.redis.queue)."),
		dropped: f.counterVec("redis_dropped_total",
			"Events not copied to Redis, by reason (queue_full: Redis slow or down; stream_broken: an earlier event of the stream was lost; upstream_record_too_large: a stateful upstream session record over 64 KiB, kept by one replica). Their streams resume on this replica only; another replica answers events purged.",
			"reason"),
		errors: f.counterVec("redis_errors_total",
			"Redis commands that failed, by operation (append, replay, revoke, revoked_check, relay, rate_limit, subscription, upstream_session).",
			"op"),
		up: f.gauge("redis_up",
			"1 while this replica reaches sessions.redis, 0 while it does not (degraded: cross-replica resumption and delivery stop, rate limits fall back to per-replica buckets; calls go on)."),
		relayed: f.counterVec("redis_relayed_total",
			"Server→client messages for a session whose GET stream this replica does not hold, published through Redis, by outcome (delivered, no_stream, queue_full, failed).",
			"outcome"),
		fallback: f.counter("rate_limit_local_fallback_total",
			"Rate-limit decisions taken with this replica's own buckets because the shared Redis buckets could not be asked in time."),
	}
	// Every outcome from the start, so a rate of them is 0, not absent.
	for _, o := range []string{RedisRelayDelivered, RedisRelayNoStream, RedisRelayDropped, RedisRelayFailed} {
		r.relayed.WithLabelValues(o)
	}
	return r
}

// RedisUp records whether Redis answers.
func (r *Redis) RedisUp(up bool) {
	if r == nil {
		return
	}
	if up {
		r.up.Set(1)
	} else {
		r.up.Set(0)
	}
}

// RedisRelayed counts a relayed message by outcome (RedisRelay*).
func (r *Redis) RedisRelayed(outcome string) {
	if r != nil {
		r.relayed.WithLabelValues(outcome).Inc()
	}
}

// RateLimitFallback counts a decision taken with the local buckets.
func (r *Redis) RateLimitFallback() {
	if r != nil {
		r.fallback.Inc()
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
