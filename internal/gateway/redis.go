package gateway

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// shared is what a replica shares with its fleet through sessions.redis:
// the replay logs and the revocation list. The zero value (no Redis) shares
// nothing.
type shared struct {
	client  redis.UniversalClient
	events  *sessions.RedisEvents
	revoked *sessions.RedisRevocations
	relay   *sessions.RedisRelay
	subs    *sessions.RedisSubscriptions
	buckets *policy.RedisBuckets
	ups     *sessions.RedisUpstreamSessions
	replica string // this process's id in the fleet's records
	health  *redisHealth
	timeout time.Duration
	m       *metrics.Redis
	log     *zap.Logger
}

// newShared connects to sessions.redis (nil cfg: no Redis). Redis need not
// be up: the client dials on first use and again after every failure, and
// the replica serves meanwhile (docs/operations.md).
func newShared(cfg *config.Config, m *metrics.Metrics, log *zap.Logger, red *redactor) (*shared, error) {
	if cfg.Sessions == nil || cfg.Sessions.Redis == nil {
		return &shared{}, nil
	}
	rc := cfg.Sessions.Redis
	o, err := redisOptions(rc)
	if err != nil {
		return nil, err
	}
	if o.Password != "" {
		red.add([]string{o.Password}) // a Redis error that quotes it is scrubbed
	}
	client := redis.NewUniversalClient(o)
	prefix := rc.KeyPrefix
	if prefix == "" {
		prefix = config.DefaultRedisKeyPrefix
	}
	queue := rc.Queue
	if queue == 0 {
		queue = config.DefaultRedisQueue
	}
	idle := cfg.Sessions.IdleTimeout.D()
	if idle <= 0 {
		idle = time.Hour // router.Options.IdleTimeout's default
	}
	so := sessions.RedisOptions{
		Client:  client,
		Prefix:  prefix,
		Limits:  replayLimits(cfg),
		TTL:     idle,
		Queue:   queue,
		Timeout: o.ReadTimeout,
		Metrics: m.NewRedis(),
		Logger:  log.Named("redis"),
	}
	replica := rand.Text()
	return &shared{
		client:  client,
		ups:     sessions.NewRedisUpstreamSessions(so),
		replica: replica,
		events:  sessions.NewRedisEvents(sessions.NewMemoryEvents(so.Limits, m), m, so),
		revoked: sessions.NewRedisRevocations(so),
		relay:   sessions.NewRedisRelay(so),
		subs:    sessions.NewRedisSubscriptions(so, replica),
		buckets: policy.NewRedisBuckets(client, prefix),
		health:  startRedisHealth(client, o.ReadTimeout, so.Metrics, so.Logger),
		timeout: o.ReadTimeout,
		m:       so.Metrics,
		log:     so.Logger,
	}, nil
}

// relayer is the router's Relay (nil: none).
func (s *shared) relayer() sessions.Relay {
	if s.relay == nil {
		return nil
	}
	return s.relay
}

// upstreamSessions is the host's UpstreamSessions (nil: none).
func (s *shared) upstreamSessions() host.UpstreamSessions {
	if s.ups == nil {
		return nil
	}
	return fleetUpstreamSessions{s.ups}
}

// fleetUpstreamSessions is host.UpstreamSessions over the sessions
// package's Redis store, which keeps its records as UpstreamRecords (the
// router's packages do not import the host): the two record types have
// the same fields, so each converts to the other.
type fleetUpstreamSessions struct {
	*sessions.RedisUpstreamSessions
}

func (f fleetUpstreamSessions) Load(ctx context.Context, session, upstream string) (host.UpstreamSession, bool, error) {
	rec, ok, err := f.RedisUpstreamSessions.Load(ctx, session, upstream)
	return host.UpstreamSession(rec), ok, err
}

func (f fleetUpstreamSessions) Save(ctx context.Context, session, upstream string, rec host.UpstreamSession, replacing string) (host.UpstreamSession, bool, error) {
	winner, saved, err := f.RedisUpstreamSessions.Save(ctx, session, upstream, sessions.UpstreamRecord(rec), replacing)
	return host.UpstreamSession(winner), saved, err
}

// subscriptions is the router's SharedSubscriptions (nil: none).
func (s *shared) subscriptions() core.SharedSubscriptions {
	if s.subs == nil {
		return nil
	}
	return s.subs
}

// limiterOptions make policy.rate_limits' buckets the fleet's.
func (s *shared) limiterOptions() []policy.LimiterOption {
	if s.client == nil {
		return nil
	}
	return []policy.LimiterOption{policy.WithShared(healthyBuckets{s}, s.timeout, func(err error) {
		s.m.RateLimitFallback()
		if !errors.Is(err, errRedisDown) {
			s.health.failed(err) // news to the health check: ping now
		}
	})}
}

// healthyBuckets asks Redis only while the health check finds it up: a
// down Redis costs a call nothing (the replica's own buckets decide).
type healthyBuckets struct{ s *shared }

func (h healthyBuckets) Take(ctx context.Context, b []policy.SharedBucket) (bool, int, time.Duration, error) {
	if !h.s.health.isUp() {
		return false, 0, 0, errRedisDown
	}
	ok, refused, retry, err := h.s.buckets.Take(ctx, b)
	if err != nil {
		h.s.m.RedisError(metrics.RedisOpRateLimit)
	}
	return ok, refused, retry, err
}

var errRedisDown = errors.New("redis is down")

// RedisReadiness is the Redis line of /readyz: degraded, never not-ready
// (a replica without Redis still serves calls and new sessions).
type RedisReadiness struct {
	// State is "up" or "degraded".
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Error string    `json:"error,omitempty"`
	// Degraded says what stops while Redis is down.
	Degraded string `json:"degraded,omitempty"`
}

// readiness reports Redis' state (nil without Redis).
func (s *shared) readiness() *RedisReadiness {
	if s.health == nil {
		return nil
	}
	up, since, err := s.health.state()
	r := &RedisReadiness{State: "up", Since: since}
	if !up {
		r.State = "degraded"
		r.Degraded = "cross-replica resumption and delivery stop and rate limits are per replica until Redis answers again; calls, new sessions and same-replica resumption go on"
		if err != nil {
			r.Error = err.Error()
		}
	}
	return r
}

// redisHealth pings Redis — every second while it answers, with backoff
// (250ms doubling to 5s) while it does not — and keeps the state that
// /readyz, mcpgw_redis_up and the rate limiter read. go-redis redials on
// demand; the pings are what notice the way back.
type redisHealth struct {
	client  redis.UniversalClient
	timeout time.Duration
	m       *metrics.Redis
	log     *zap.Logger
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}

	mu    sync.Mutex
	up    bool
	since time.Time
	err   error
}

func startRedisHealth(c redis.UniversalClient, timeout time.Duration, m *metrics.Redis, log *zap.Logger) *redisHealth {
	h := &redisHealth{client: c, timeout: timeout, m: m, log: log, up: true, since: time.Now(), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	m.RedisUp(true)
	go h.run()
	return h
}

func (h *redisHealth) run() {
	defer close(h.done)
	wait := time.Duration(0)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		err := h.client.Ping(ctx).Err()
		cancel()
		h.set(err)
		switch {
		case err == nil:
			wait = 0
		case wait == 0: // just went down: the backoff starts short
			wait = 250 * time.Millisecond
		default:
			wait = min(2*wait, 5*time.Second)
		}
		next := wait
		if next == 0 {
			next = time.Second
		}
		t := time.NewTimer(next)
		select {
		case <-t.C:
		case <-h.kick:
			t.Stop()
		case <-h.stop:
			t.Stop()
			return
		}
	}
}

// failed is told of a command that failed: the next ping comes at once.
func (h *redisHealth) failed(error) {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

func (h *redisHealth) set(err error) {
	h.mu.Lock()
	was := h.up
	h.up, h.err = err == nil, err
	if was != h.up {
		h.since = time.Now()
	}
	h.mu.Unlock()
	if was == (err == nil) {
		return
	}
	h.m.RedisUp(err == nil)
	if err != nil {
		h.log.Warn("redis: unreachable; degraded to this replica alone (cross-replica resumption and delivery stop, rate limits per replica) until it answers", zap.Error(err))
	} else {
		h.log.Info("redis: reachable again; the fleet's shared state is back")
	}
}

func (h *redisHealth) isUp() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up
}

func (h *redisHealth) state() (bool, time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up, h.since, h.err
}

func (h *redisHealth) close() {
	close(h.stop)
	<-h.done
}

// eventStore is the router's EventStore (nil: its own MemoryEvents).
func (s *shared) eventStore() sessions.EventStore {
	if s.events == nil {
		return nil
	}
	return s.events
}

// revocations is the router's Revocations (nil: none).
func (s *shared) revocations() sessions.Revocations {
	if s.revoked == nil {
		return nil
	}
	return s.revoked
}

// close stops the writer (after one bounded attempt at what is queued) and
// the subscriber, then the client. After the router closed.
func (s *shared) close() {
	if s.client == nil {
		return
	}
	s.health.close()
	s.relay.Close()
	s.subs.Close()
	s.ups.Close()
	s.events.Close()
	s.revoked.Close()
	_ = s.client.Close()
}

// redisOptions turns sessions.redis into go-redis' universal options.
func redisOptions(rc *config.Redis) (*redis.UniversalOptions, error) {
	o := &redis.UniversalOptions{
		Addrs:         rc.Addrs,
		MasterName:    rc.MasterName,
		IsClusterMode: rc.Cluster,
		Username:      rc.Username,
		DialTimeout:   rc.DialTimeout.D(),
		ReadTimeout:   rc.ReadTimeout.D(),
		// Every command is bounded by ReadTimeout; a retry would double it.
		MaxRetries: -1,
		// The callers' deadlines (RedisOptions.Timeout) bound dials too, so
		// a black-holed Redis costs a rehydration at most read_timeout.
		ContextTimeoutEnabled: true,
	}
	if rc.Addr != "" {
		o.Addrs = []string{rc.Addr}
	}
	if rc.URL != "" {
		u, err := redis.ParseURL(rc.URL)
		if err != nil {
			return nil, fmt.Errorf("sessions.redis.url: %w; write e.g. redis://127.0.0.1:6379/0", err)
		}
		o.Addrs, o.DB, o.TLSConfig = []string{u.Addr}, u.DB, u.TLSConfig
		if o.Username == "" {
			o.Username = u.Username
		}
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = config.DefaultRedisDialTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = config.DefaultRedisReadTimeout
	}
	o.WriteTimeout = o.ReadTimeout
	if rc.PasswordFile != "" {
		b, err := os.ReadFile(rc.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("sessions.redis.password_file: %w; put the Redis password in it, or remove password_file", err)
		}
		o.Password = strings.TrimRight(string(b), "\r\n")
		if o.MasterName != "" {
			o.SentinelPassword = o.Password
			o.SentinelUsername = o.Username
		}
	}
	if rc.TLS != nil {
		t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: rc.TLS.ServerName}
		if rc.TLS.CAFile != "" {
			pem, err := os.ReadFile(rc.TLS.CAFile)
			if err != nil {
				return nil, fmt.Errorf("sessions.redis.tls.ca_file: %w", err)
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("sessions.redis.tls.ca_file %s: no PEM certificate in it; give the CA that signs Redis' certificate", rc.TLS.CAFile)
			}
		}
		o.TLSConfig = t
	}
	return o, nil
}
