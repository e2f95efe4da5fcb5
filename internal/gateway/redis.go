package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// shared is what a replica shares with its fleet through sessions.redis:
// the replay logs and the revocation list. The zero value (no Redis) shares
// nothing.
type shared struct {
	client  redis.UniversalClient
	events  *sessions.RedisEvents
	revoked *sessions.RedisRevocations
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
	return &shared{
		client:  client,
		events:  sessions.NewRedisEvents(sessions.NewMemoryEvents(so.Limits, m), m, so),
		revoked: sessions.NewRedisRevocations(so),
	}, nil
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
