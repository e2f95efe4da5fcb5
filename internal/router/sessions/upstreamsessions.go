package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// With sessions.redis, a stateful upstream's session is the fleet's, not
// one replica's (host/fleetsessions.go says why and how it is used): the
// replica that initializes it records it here and the others continue it.
//
// One key per downstream session and upstream,
// "<prefix>{s:<h>}:up:<upstream>" (h as for the Streams, so a session's
// keys share a Cluster slot), holding the JSON of an UpstreamRecord —
// the upstream's Mcp-Session-Id and initialize answer, or the replica
// running a stdio child — at most maxUpstreamRecord bytes, expiring
// RedisOptions.TTL (sessions.idle_timeout) after it was written or last
// touched. The upstream's session id is a handle to the session's state
// upstream: Redis must be as private as the session keys (docs/security.md).
//
// Load and Save are on the path of a session's first request on a replica
// (bounded by RedisOptions.Timeout); Touch and Forget never wait: they go
// through a bounded queue to one goroutine, and are dropped (counted) when
// it is full.

// maxUpstreamRecord bounds one record (an upstream's initialize answer
// with long instructions): a larger one is not shared.
const maxUpstreamRecord = 64 << 10

// forgetScript deletes a record only if it still names the given session,
// so a replica forgetting a dead one never deletes a new one another made.
var forgetScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local ok, rec = pcall(cjson.decode, v)
if ok and (rec.id == ARGV[1] or rec.stdio == ARGV[1]) then return redis.call('DEL', KEYS[1]) end
return 0`)

// saveScript sets a record unless one exists that does not name ARGV[3]
// (a dead one being replaced); it answers the standing record, or nil
// when it set ARGV[1] (with a TTL of ARGV[2] ms).
var saveScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local ok, rec = pcall(cjson.decode, v)
  if ARGV[3] == '' or not ok or (rec.id ~= ARGV[3] and rec.stdio ~= ARGV[3]) then return v end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false`)

// UpstreamRecord is the record of a stateful upstream's session the fleet
// shares: UpstreamRecord's fields, with its JSON. It is a type of its
// own so that the router's packages need not import the host; the gateway
// converts between the two (a conversion the compiler checks field by
// field) where it hands this store to the host as its UpstreamSessions.
type UpstreamRecord struct {
	// ID is the upstream's Mcp-Session-Id (HTTP upstreams).
	ID string `json:"id,omitempty"`
	// Init is the upstream's initialize answer (HTTP upstreams).
	Init *mcp.InitializeResult `json:"init,omitempty"`
	// StdioReplica names the replica running the session's child (stdio).
	StdioReplica string `json:"stdio,omitempty"`
}

// RedisUpstreamSessions is the host's UpstreamSessions over Redis (in
// UpstreamRecords).
type RedisUpstreamSessions struct {
	o    RedisOptions
	q    chan upstreamOp
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

type upstreamOp struct {
	key    string
	forget string // the id to forget; "" touches
}

// NewRedisUpstreamSessions starts the store (o.Client, Prefix, TTL,
// Timeout, Metrics, Logger are used); Close stops it.
func NewRedisUpstreamSessions(o RedisOptions) *RedisUpstreamSessions {
	o = o.withDefaults()
	s := &RedisUpstreamSessions{o: o, q: make(chan upstreamOp, 1024), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *RedisUpstreamSessions) key(session, upstream string) string {
	return s.o.Prefix + "{s:" + sessionHash(session) + "}:up:" + upstream
}

// Load is the host's UpstreamSessions.Load.
func (s *RedisUpstreamSessions) Load(ctx context.Context, session, upstream string) (UpstreamRecord, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	b, err := s.o.Client.Get(ctx, s.key(session, upstream)).Bytes()
	if errors.Is(err, redis.Nil) {
		return UpstreamRecord{}, false, nil
	}
	if err != nil {
		s.o.Metrics.RedisError(metrics.RedisOpUpstreamSession)
		return UpstreamRecord{}, false, fmt.Errorf("redis: %w", err)
	}
	var rec UpstreamRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return UpstreamRecord{}, false, fmt.Errorf("redis: unreadable upstream session record: %w", err)
	}
	return rec, true, nil
}

// Save is the host's UpstreamSessions.Save.
func (s *RedisUpstreamSessions) Save(ctx context.Context, session, upstream string, rec UpstreamRecord, replacing string) (UpstreamRecord, bool, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return UpstreamRecord{}, false, err
	}
	if len(b) > maxUpstreamRecord {
		s.o.Metrics.RedisDropped(metrics.RedisDroppedUpstreamRecord, 1)
		return UpstreamRecord{}, false, fmt.Errorf("the upstream's initialize answer makes a record of %d bytes, over the %d a fleet shares; this session's upstream session stays this replica's", len(b), maxUpstreamRecord)
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	v, err := saveScript.Run(ctx, s.o.Client, []string{s.key(session, upstream)}, b, s.o.TTL.Milliseconds(), replacing).Text()
	if errors.Is(err, redis.Nil) {
		return rec, true, nil
	}
	if err != nil {
		s.o.Metrics.RedisError(metrics.RedisOpUpstreamSession)
		return UpstreamRecord{}, false, fmt.Errorf("redis: %w", err)
	}
	var winner UpstreamRecord
	if err := json.Unmarshal([]byte(v), &winner); err != nil {
		return UpstreamRecord{}, false, fmt.Errorf("redis: unreadable upstream session record: %w", err)
	}
	return winner, false, nil
}

// Forget is the host's UpstreamSessions.Forget.
func (s *RedisUpstreamSessions) Forget(session, upstream, id string) {
	s.enqueue(upstreamOp{key: s.key(session, upstream), forget: id})
}

// Touch is the host's UpstreamSessions.Touch.
func (s *RedisUpstreamSessions) Touch(session, upstream string) {
	s.enqueue(upstreamOp{key: s.key(session, upstream)})
}

// RefreshEvery is the host's UpstreamSessions.RefreshEvery: a quarter of the TTL,
// at most 30s, so a session in use never loses its record.
func (s *RedisUpstreamSessions) RefreshEvery() time.Duration {
	return min(s.o.TTL/4, 30*time.Second)
}

func (s *RedisUpstreamSessions) enqueue(op upstreamOp) {
	select {
	case s.q <- op:
	default:
		s.o.Metrics.RedisError(metrics.RedisOpUpstreamSession) // a record outlives its use until its TTL
	}
}

func (s *RedisUpstreamSessions) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case op := <-s.q:
			ctx, cancel := context.WithTimeout(context.Background(), s.o.Timeout)
			var err error
			if op.forget != "" {
				err = forgetScript.Run(ctx, s.o.Client, []string{op.key}, op.forget).Err()
			} else {
				err = s.o.Client.Expire(ctx, op.key, s.o.TTL).Err()
			}
			cancel()
			if err != nil && !errors.Is(err, redis.Nil) {
				s.o.Metrics.RedisError(metrics.RedisOpUpstreamSession)
				s.o.Logger.Warn("redis: cannot refresh or remove a stateful upstream's session record; it expires with sessions.idle_timeout", zap.Error(err))
			}
		}
	}
}

// Close stops the goroutine; what is still queued is dropped (the records
// expire).
func (s *RedisUpstreamSessions) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}
