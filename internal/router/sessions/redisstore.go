package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// With sessions.redis, the replay logs are shared by the fleet: the events
// of a session's call streams that another replica could be asked for are
// also copied to a Redis Stream per session, so a client whose stream was
// cut on replica A resumes it with Last-Event-ID on replica B.
//
// Which ones: a stream is held back (in the log's memory, beside the local
// copy) while it is young and short, and copied once it is cut
// (StreamCutter: its connection went away or a write failed), gets a
// second event (progress, a server→client request: a long stream), or
// outlives RedisOptions.Hold; from then on each entry is queued as it
// comes. A stream that ends with its one event, the answer, before any of
// these is never written to Redis: no client can ask another replica for
// it. That is most calls, and copying them was a third of a call's CPU in
// a fleet (docs/benchmarks.md). Behind a proxy the replica sees a client's
// cut late or never (the proxy holds its own connection), which is why a
// second event, not the end, decides; and Hold is below Grace, so that an
// unseen cut of a call still running is in Redis before a replay
// elsewhere gives up waiting for it. What this gives up: a one-answer call
// shorter than Hold, cut where this replica cannot see it before its
// answer and resumed on another replica, is answered "events purged"
// there (on this one it resumes); and the events of a stream younger than
// Hold die with a replica that crashes (its local log does too).
//
// The local MemoryEvents stays the first home of every event: appends go
// to it and to a bounded queue that one writer goroutine copies to Redis,
// so a call never waits on Redis. A replay on the replica that holds the
// stream is served from memory, as without Redis; a replica that does not
// know the stream reads it from Redis, and follows a stream still running
// elsewhere by polling (RedisOptions.Poll).
//
// What is never silently lost: an event that cannot be copied (queue full,
// Redis error) breaks its stream in Redis — the next entry the writer copies
// for it is a "broken" marker — and a replay elsewhere answers ErrPurged,
// as it does for events trimmed by the length cap, for a stream Redis
// cannot tell apart from a trimmed one, and when Redis cannot be read.
//
// Layout, under RedisOptions.Prefix, with a hash tag so that Cluster keeps a
// session's keys on one slot: "{s:<h>}" is the Stream of session h (the
// first 16 bytes of SHA-256 of its id, in hex: the bearer id itself is
// never written to Redis), capped at Limits.SessionEvents entries (MAXLEN,
// exact) and expiring TTL after its last write. Its entries are
// {s: stream, q: seq, r: request id} plus d (an event's data), o (the
// stream's opening), f (its end, q its last seq) or x (broken).
// The standalone GET stream ("g") is not copied: each replica numbers its
// own, and a client that resumes it elsewhere is told to re-read its lists.

// RedisOptions configure NewRedisEvents and NewRedisRevocations.
type RedisOptions struct {
	Client redis.UniversalClient
	// Prefix starts every key (config sessions.redis.key_prefix).
	Prefix string
	// Limits: SessionEvents caps each session's Stream.
	Limits Limits
	// TTL is how long a session's Stream outlives its last write
	// (sessions.idle_timeout).
	TTL time.Duration
	// Queue bounds the copies waiting for the writer.
	Queue int
	// Timeout bounds one Redis round trip (sessions.redis.read_timeout).
	Timeout time.Duration
	// Poll is how often a replay of a stream running on another replica
	// looks for its new events (0: 250ms).
	Poll time.Duration
	// Grace is how long a replay waits for a stream Redis does not have
	// (its copy may be late) before answering purged (0: 2s).
	Grace time.Duration
	// Hold is how long a stream's entries wait before they are copied,
	// in case the stream ends delivered whole and need not be (0: Grace/4;
	// at most Grace/2, so a copy is never later than a replay's wait).
	Hold time.Duration
	// Metrics counts the queue, drops and errors (nil: nowhere).
	Metrics *metrics.Redis
	// Logger reports Redis failures (nil: nowhere).
	Logger *zap.Logger
}

// withDefaults is o with every unset bound at its default, the one home of
// those defaults for the Redis-backed parts.
func (o RedisOptions) withDefaults() RedisOptions {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Timeout <= 0 {
		o.Timeout = 500 * time.Millisecond
	}
	if o.TTL <= 0 {
		o.TTL = time.Hour // router.Options.IdleTimeout's default
	}
	if o.Queue <= 0 {
		o.Queue = 10000
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Second
	}
	if o.Hold <= 0 {
		o.Hold = o.Grace / 4
	}
	o.Hold = min(o.Hold, o.Grace/2)
	return o
}

// RedisEvents is the EventStore of a replica in a fleet: its sessions'
// logs in memory, copied to Redis (the package comment above says how).
type RedisEvents struct {
	local *MemoryEvents
	em    EventMetrics
	o     RedisOptions
	q     chan redisOp
	kick  chan struct{} // ends were added
	stop  chan struct{}

	// ends are end markers the queue had no room for (or Redis refused):
	// without one a replay elsewhere would wait for an end that never
	// comes, so they are kept aside, at most Queue of them, and retried.
	endsMu sync.Mutex
	ends   []redisOp
	done   chan struct{}
	close  sync.Once
}

// redisOp is one entry for the writer to copy.
type redisOp struct {
	log    *redisLog
	stream string
	values []any
	end    bool // the stream's end marker
}

// NewRedisEvents makes the shared store over local, whose metrics em also
// counts the purged replays answered from Redis, and starts its writer;
// Close stops it.
func NewRedisEvents(local *MemoryEvents, em EventMetrics, o RedisOptions) *RedisEvents {
	if em == nil {
		em = noEventMetrics{}
	}
	o = o.withDefaults()
	s := &RedisEvents{local: local, em: em, o: o, q: make(chan redisOp, o.Queue), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.writer()
	return s
}

// Close stops the writer after one last bounded attempt at what is queued.
func (s *RedisEvents) Close() {
	s.close.Do(func() { close(s.stop) })
	<-s.done
}

// Log implements EventStore. Unlike MemoryEvents it makes a new log each
// time: the Store asks once per session, when it adds it.
func (s *RedisEvents) Log(session string) EventLog {
	return &redisLog{store: s, local: s.local.Log(session), key: s.o.Prefix + "{s:" + sessionHash(session) + "}", seqs: map[string]int{}, held: map[string]*heldStream{}, reqs: map[string]string{}, broken: map[string]bool{}, lost: map[string]bool{}, unseen: map[string]time.Time{}}
}

// Drop implements EventStore: the local log goes; the Stream in Redis
// stays until its TTL, because another replica may still serve the
// session (a replica drops a session it reaped while another serves it).
func (s *RedisEvents) Drop(session string) { s.local.Drop(session) }

// sessionHash names a session in Redis without writing its bearer id.
func sessionHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:16])
}

// redisLog is one session's log: local first, copied to Redis.
type redisLog struct {
	store *RedisEvents
	local EventLog
	key   string

	mu     sync.Mutex
	seqs   map[string]int         // the last seq of each open stream
	held   map[string]*heldStream // streams not copied yet (see the package comment)
	reqs   map[string]string      // the request each open stream answers, as JSON
	broken map[string]bool        // streams with a lost copy whose "broken" marker is not yet queued
	lost   map[string]bool        // streams whose marker is queued: nothing more is copied
	unseen map[string]time.Time   // streams a replay asked for that Redis did not have yet, since when
}

// maxUnseen bounds the streams one session's replays wait Grace for.
const maxUnseen = 16

// heldStream is a stream whose entries are not copied yet: its opening
// and at most one event.
type heldStream struct {
	entries []heldEntry
	timer   *time.Timer // releases it after Hold
}

type heldEntry struct {
	seq  int
	kind string
	data []byte // the local log's own slice, which nobody changes
}

// StreamCutter is an EventLog that wants to know when a stream's
// connection is cut before its end was delivered (RedisEvents' logs: such
// a stream may be resumed on another replica, so it is copied now).
type StreamCutter interface {
	Cut(stream string)
}

// Cut implements StreamCutter.
func (l *redisLog) Cut(stream string) { l.release(stream) }

// release copies what stream held back and lets its next entries through.
func (l *redisLog) release(stream string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[stream]
	if h == nil {
		return
	}
	delete(l.held, stream)
	h.timer.Stop()
	for _, e := range h.entries {
		l.enqueueLocked(stream, e.seq, e.kind, e.data)
	}
}

func requestJSON(request jsonrpc.ID) string {
	if b, err := json.Marshal(request); err == nil {
		return string(b)
	}
	return "null"
}

func (l *redisLog) Open(stream string, request jsonrpc.ID) {
	l.local.Open(stream, request)
	if stream == StandaloneStream {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs[stream] = requestJSON(request)
	if l.held[stream] == nil {
		l.held[stream] = &heldStream{entries: []heldEntry{{kind: "o"}}, timer: time.AfterFunc(l.store.o.Hold, func() { l.release(stream) })}
	}
}

func (l *redisLog) Append(stream string, data []byte) string {
	id := l.local.Append(stream, data)
	if stream == StandaloneStream {
		return id
	}
	_, seq, _ := ParseEventID(id)
	l.enqueue(stream, seq, "d", data)
	return id
}

func (l *redisLog) Finish(stream string) {
	l.local.Finish(stream)
	if stream == StandaloneStream {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[stream]; h != nil {
		// Ended with nothing cut: delivered whole on its POST, so no
		// replica will be asked for it and Redis never hears of it.
		h.timer.Stop()
		delete(l.held, stream)
		delete(l.seqs, stream)
		delete(l.reqs, stream)
		return
	}
	l.enqueueLocked(stream, -1, "f", nil)
}

// enqueue holds back an entry of a young stream, or queues it.
func (l *redisLog) enqueue(stream string, seq int, kind string, data []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[stream]; h != nil {
		l.seqs[stream] = max(l.seqs[stream], seq)
		h.entries = append(h.entries, heldEntry{seq: seq, kind: kind, data: data})
		if len(h.entries) <= 2 { // the opening and one event: maybe the answer
			return
		}
		delete(l.held, stream)
		h.timer.Stop()
		for _, e := range h.entries {
			l.enqueueLocked(stream, e.seq, e.kind, e.data)
		}
		return
	}
	l.enqueueLocked(stream, seq, kind, data)
}

// enqueueLocked hands the writer one entry of stream, never waiting: when
// the queue is full the entry is lost and the stream broken. The end marker
// ("f", seq -1) carries the stream's last seq. The caller holds l.mu.
func (l *redisLog) enqueueLocked(stream string, seq int, kind string, data []byte) {
	s := l.store
	switch kind {
	case "o":
	case "f":
		seq = l.seqs[stream]
		defer func() {
			delete(l.seqs, stream)
			delete(l.reqs, stream)
			delete(l.broken, stream)
			delete(l.lost, stream)
		}()
	default:
		l.seqs[stream] = max(l.seqs[stream], seq)
	}
	req, ok := l.reqs[stream]
	if !ok {
		req = "null"
	}
	if l.lost[stream] && kind != "f" {
		s.o.Metrics.RedisDropped(metrics.RedisDroppedBroken, 1)
		return
	}
	values := []any{"s", stream, "q", strconv.Itoa(seq), "r", req, kind, string(data)}
	broken := l.broken[stream] || l.lost[stream]
	if broken {
		values = append(values, "x", "1") // an earlier entry was lost: say so
	}
	select {
	case s.q <- redisOp{log: l, stream: stream, values: values, end: kind == "f"}:
		if broken {
			delete(l.broken, stream)
			l.lost[stream] = true
		}
	default:
		s.o.Metrics.RedisDropped(metrics.RedisDroppedQueueFull, 1)
		if kind == "f" {
			if !broken {
				values = append(values, "x", "1")
			}
			s.keepEnd(redisOp{log: l, stream: stream, values: values, end: true})
		} else if !l.lost[stream] {
			l.broken[stream] = true
		}
	}
}

// keepEnd sets an end marker aside for the writer's next batch.
func (s *RedisEvents) keepEnd(op redisOp) {
	s.endsMu.Lock()
	if len(s.ends) < s.o.Queue {
		s.ends = append(s.ends, op)
	} else {
		s.o.Logger.Warn("redis: too many stream ends waiting; a replay of this stream on another replica may wait until its client gives up")
	}
	s.endsMu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// takeEnds returns the ends set aside, at most n.
func (s *RedisEvents) takeEnds(n int) []redisOp {
	s.endsMu.Lock()
	defer s.endsMu.Unlock()
	n = min(n, len(s.ends))
	out := append([]redisOp(nil), s.ends[:n]...)
	s.ends = append(s.ends[:0], s.ends[n:]...)
	return out
}

// failed records that the writer could not copy an entry of stream.
func (l *redisLog) failed(stream string) {
	l.mu.Lock()
	if _, open := l.seqs[stream]; open && !l.lost[stream] {
		l.broken[stream] = true
	}
	l.mu.Unlock()
}

// Since implements EventLog: the local log when it knows the stream, Redis
// when it does not.
func (l *redisLog) Since(stream string, seq int) (Replay, error) {
	r, err := l.local.Since(stream, seq)
	if !errors.Is(err, ErrUnknownStream) || stream == StandaloneStream {
		return r, err
	}
	return l.remote(stream, seq)
}

// remote reads stream's events after seq from Redis.
func (l *redisLog) remote(stream string, seq int) (Replay, error) {
	s := l.store
	ctx, cancel := context.WithTimeout(context.Background(), s.o.Timeout)
	defer cancel()
	entries, err := s.o.Client.XRangeN(ctx, l.key, "-", "+", int64(s.o.Limits.SessionEvents)+1).Result()
	if err != nil {
		// Whether the stream existed cannot be told: say its events are
		// gone rather than pretend it never was.
		s.o.Metrics.RedisError(metrics.RedisOpReplay)
		s.o.Logger.Warn("redis: cannot read a replay log; answering events purged", zap.Error(err))
		s.em.ReplayPurged()
		return Replay{}, ErrPurged
	}
	// A stream's entries are contiguous from its first retained one
	// (trimming takes the oldest), so the events after seq must be seq+1,
	// seq+2, ... up to the end marker's seq; anything else means events
	// after seq are gone.
	var (
		r     Replay
		found bool
		next  = seq + 1
	)
	for _, e := range entries {
		if str(e.Values["s"]) != stream {
			continue
		}
		if !found {
			found = true
			_ = json.Unmarshal([]byte(str(e.Values["r"])), &r.Request)
		}
		if _, broken := e.Values["x"]; broken {
			return l.purged(r.Request)
		}
		q, _ := strconv.Atoi(str(e.Values["q"]))
		if d, ok := e.Values["d"]; ok && q > seq {
			if q != next {
				return l.purged(r.Request)
			}
			r.Events = append(r.Events, Event{Stream: stream, Seq: q, Data: []byte(str(d))})
			next++
		} else if _, ok := e.Values["f"]; ok {
			if q >= next {
				return l.purged(r.Request)
			}
			r.Complete = true
		}
	}
	if !found {
		// Not copied yet, never copied, or every entry of it trimmed or
		// lost: a replica cannot tell these apart, and must not answer a
		// resume of a call's stream with a silent nothing. It waits
		// Grace for a late copy, then says the events are gone.
		l.mu.Lock()
		first, waiting := l.unseen[stream]
		if !waiting && len(l.unseen) < maxUnseen {
			first, waiting = time.Now(), true
			l.unseen[stream] = first
		}
		l.mu.Unlock()
		if !waiting || time.Since(first) >= s.o.Grace {
			l.mu.Lock()
			delete(l.unseen, stream)
			l.mu.Unlock()
			return l.purged(nil)
		}
	} else {
		l.mu.Lock()
		delete(l.unseen, stream)
		l.mu.Unlock()
	}
	if !r.Complete {
		w := make(chan struct{})
		time.AfterFunc(s.o.Poll, func() { close(w) })
		r.Wake = w
	}
	return r, nil
}

func (l *redisLog) purged(request jsonrpc.ID) (Replay, error) {
	l.store.em.ReplayPurged()
	return Replay{Request: request}, ErrPurged
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// writer copies the queue to Redis in pipelined batches until Close,
// backing off while Redis fails.
func (s *RedisEvents) writer() {
	defer close(s.done)
	const maxBatch = 256
	batch := make([]redisOp, 0, maxBatch)
	backoff := time.Duration(0)
	for {
		select {
		case op := <-s.q:
			batch = append(batch[:0], op)
		case <-s.kick:
			batch = batch[:0]
		case <-s.stop:
			s.flushRest()
			return
		}
		batch = append(batch, s.takeEnds(maxBatch/2)...)
	fill:
		for len(batch) < maxBatch {
			select {
			case op := <-s.q:
				batch = append(batch, op)
			default:
				break fill
			}
		}
		s.o.Metrics.RedisQueue(len(s.q))
		if len(batch) == 0 || s.flush(batch) {
			backoff = 0
			continue
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), 2*time.Second)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.stop:
			t.Stop()
			s.flushRest()
			return
		}
	}
}

// flushRest makes one bounded attempt at what is queued at Close.
func (s *RedisEvents) flushRest() {
	batch := s.takeEnds(s.o.Queue)
	for {
		select {
		case op := <-s.q:
			batch = append(batch, op)
		default:
			if len(batch) > 0 {
				s.flush(batch)
			}
			s.o.Metrics.RedisQueue(0)
			return
		}
	}
}

// flush copies batch in one pipeline; false when Redis failed (the
// streams of the failed entries are broken).
func (s *RedisEvents) flush(batch []redisOp) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.Timeout+time.Duration(len(batch))*time.Millisecond)
	defer cancel()
	pipe := s.o.Client.Pipeline()
	adds := make([]*redis.StringCmd, len(batch))
	keys := make(map[string]struct{}, len(batch))
	for i, op := range batch {
		adds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: op.log.key, MaxLen: int64(s.o.Limits.SessionEvents), Values: op.values})
		keys[op.log.key] = struct{}{}
	}
	// One expiry per Stream per batch, after its entries: a long stream's
	// burst is one command more, not one per entry.
	for k := range keys {
		pipe.PExpire(ctx, k, s.o.TTL)
	}
	_, err := pipe.Exec(ctx)
	if err == nil {
		return true
	}
	n := 0
	for i, op := range batch {
		if adds[i].Err() == nil {
			continue
		}
		n++
		if !op.end {
			op.log.failed(op.stream) // its next entry says it is broken
			continue
		}
		// Nothing comes after an end marker to carry the news: retry it,
		// broken, so a replay elsewhere answers purged instead of
		// waiting for an end that never comes.
		if len(op.values) == 8 {
			op.values = append(op.values, "x", "1")
		}
		s.keepEnd(op)
	}
	if n == 0 { // an expiry failed: the entries are there
		n = len(batch)
	}
	s.o.Metrics.RedisError(metrics.RedisOpAppend)
	s.o.Logger.Warn("redis: cannot copy replay events; their streams resume on this replica only", zap.Int("entries", n), zap.Error(err))
	return false
}

// Revocations is the fleet's list of sealed session ids ended by their
// client (DELETE): Store.Delete adds one for the token's remaining life,
// Store.Rehydrate refuses one listed.
// Watch has ended (by sessionHash) what another replica revokes, so a
// copy already in memory ends too.
type Revocations interface {
	Revoke(id string, ttl time.Duration)
	Revoked(id string) bool
	Watch(ended func(hash string))
}

// RedisRevocations keeps the Revocations in Redis: one key per id
// ("<prefix>ended:<h>", h as for the Streams), expiring when the token
// would.
//
// When Redis cannot be asked, the check fails open — a token is accepted
// (counted and logged) — and this is a decision, not an accident: the
// replica that saw the DELETE still refuses the id (Store's ended set,
// without Redis), and failing closed would end every session that moves
// between replicas while Redis is down, which is what the fleet must
// survive. What is lost is bounded: a DELETE that could not be recorded is
// kept (at most maxPendingRevocations) and recorded once Redis answers, so
// the window in which another replica accepts a DELETEd id is the outage,
// not the token's life. docs/security.md says so.
type RedisRevocations struct {
	o    RedisOptions
	stop chan struct{}
	done chan struct{}
	once sync.Once
	sub  *redis.PubSub

	pendingMu sync.Mutex
	pending   map[string]time.Time // ids whose Revoke failed, by expiry
	retryDone chan struct{}
}

// maxPendingRevocations bounds the DELETEs kept for Redis' return.
const maxPendingRevocations = 10000

// NewRedisRevocations makes the list (o.Client, Prefix, Timeout, Metrics,
// Logger are used).
func NewRedisRevocations(o RedisOptions) *RedisRevocations {
	o = o.withDefaults()
	r := &RedisRevocations{o: o, stop: make(chan struct{}), done: make(chan struct{}), pending: map[string]time.Time{}, retryDone: make(chan struct{})}
	go r.retry()
	return r
}

// retry records the pending revocations, every second, until Close.
func (r *RedisRevocations) retry() {
	defer close(r.retryDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.pendingMu.Lock()
		ids := make(map[string]time.Time, len(r.pending))
		for id, exp := range r.pending {
			ids[id] = exp
		}
		r.pendingMu.Unlock()
		for id, exp := range ids {
			if r.record(id, time.Until(exp)) != nil {
				break // still down: the next tick tries again
			}
			r.pendingMu.Lock()
			delete(r.pending, id)
			r.pendingMu.Unlock()
		}
	}
}

// Pending is how many DELETEs wait for Redis to be recorded.
func (r *RedisRevocations) Pending() int {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	return len(r.pending)
}

func (r *RedisRevocations) key(id string) string { return r.o.Prefix + "ended:" + sessionHash(id) }

func (r *RedisRevocations) channel() string { return r.o.Prefix + "ended" }

// Watch implements Revocations: one subscriber goroutine (go-redis
// resubscribes after a reconnect), stopped by Close. Call it once.
func (r *RedisRevocations) Watch(ended func(hash string)) {
	r.sub = r.o.Client.Subscribe(context.Background(), r.channel())
	go listen(r.sub, r.stop, r.done, ended)
}

// listen hands each message's payload on sub to handle until sub closes
// or stop is closed, then closes done: the loop of every subscriber
// goroutine here (revocations, shared subscriptions).
func listen(sub *redis.PubSub, stop <-chan struct{}, done chan<- struct{}, handle func(payload string)) {
	defer close(done)
	ch := sub.Channel()
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return
			}
			handle(m.Payload)
		case <-stop:
			return
		}
	}
}

// Close stops Watch's subscriber.
func (r *RedisRevocations) Close() {
	r.once.Do(func() {
		close(r.stop)
		<-r.retryDone
		if r.sub != nil {
			_ = r.sub.Close()
			<-r.done
		}
	})
}

// Revoke implements Revocations.
func (r *RedisRevocations) Revoke(id string, ttl time.Duration) {
	if ttl <= 0 {
		return // the token is expired anyway
	}
	if err := r.record(id, ttl); err != nil {
		r.o.Metrics.RedisError(metrics.RedisOpRevoke)
		r.pendingMu.Lock()
		kept := len(r.pending) < maxPendingRevocations
		if kept {
			r.pending[id] = time.Now().Add(ttl)
		}
		r.pendingMu.Unlock()
		r.o.Logger.Warn("redis: cannot record a DELETEd session; other replicas accept its id until Redis answers and it is recorded", zap.Bool("kept_for_retry", kept), zap.Error(err))
	}
}

func (r *RedisRevocations) record(id string, ttl time.Duration) error {
	if ttl <= 0 {
		return nil // expired meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.o.Timeout)
	defer cancel()
	pipe := r.o.Client.Pipeline()
	pipe.Set(ctx, r.key(id), "1", ttl)
	pipe.Publish(ctx, r.channel(), sessionHash(id))
	_, err := pipe.Exec(ctx)
	return err
}

// Revoked implements Revocations.
func (r *RedisRevocations) Revoked(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.o.Timeout)
	defer cancel()
	n, err := r.o.Client.Exists(ctx, r.key(id)).Result()
	if err != nil {
		r.o.Metrics.RedisError(metrics.RedisOpRevoked)
		r.o.Logger.Warn("redis: cannot check whether a session was DELETEd; accepting its id", zap.Error(err))
		return false
	}
	return n > 0
}
