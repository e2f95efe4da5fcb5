package sessions

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/metrics"
)

// With sessions.redis, what a replica has for a session outside any call
// — a resource update for its subscription, a stateful upstream's log
// message or task status — goes to whichever replica holds the session's
// GET stream: the Relay.
//
// One Redis pub/sub channel per session ("<prefix>{o:<h>}", h as for the
// Streams), subscribed by the replica while it holds the session's GET
// stream, and published to by a replica that has something for the
// session and holds no stream for it. A channel per session rather than
// per replica: the holder is simply whoever subscribed (no registry of
// "session → replica" to keep true across crashes and moves), PUBLISH
// answers how many replicas received it (0: nobody holds a stream, the
// message is a dropped hint, counted), and a stream that moves is followed
// at once. One connection carries every subscription of a replica (go-redis
// multiplexes them and resubscribes after a reconnect).
//
// Pub/sub, not Streams: these messages are hints a client re-reads anyway
// (the spec lets them be lost with the stream), so a durable log is not
// worth a write per message; what must not be lost, the events of a call's
// stream, goes through the replay Streams (redisstore.go).
//
// Publishing never blocks the caller: messages wait in a bounded queue for
// one publisher goroutine; a full queue (Redis slow or down) drops and
// counts.

// Relay carries server→client messages to the replica holding a
// session's GET stream (nil: no fleet).
type Relay interface {
	// Publish hands msg to whichever replica holds session id's stream.
	Publish(id string, msg []byte) bool
	// Hold delivers what is published for id to deliver until release.
	Hold(id string, deliver func([]byte)) (release func())
}

// RedisRelay is the Relay over Redis pub/sub.
type RedisRelay struct {
	o    RedisOptions
	q    chan relayMsg
	sub  *redis.PubSub
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once

	mu      sync.Mutex
	holders map[string]map[*relayHolder]bool // by channel
}

type relayMsg struct {
	channel string
	data    []byte
}

type relayHolder struct{ deliver func([]byte) }

// NewRedisRelay makes the relay (o.Client, Prefix, Queue, Timeout,
// Metrics, Logger are used) and starts its two goroutines; Close stops
// them.
func NewRedisRelay(o RedisOptions) *RedisRelay {
	o = o.withDefaults()
	r := &RedisRelay{o: o, q: make(chan relayMsg, min(o.Queue, 4096)), stop: make(chan struct{}), holders: map[string]map[*relayHolder]bool{}}
	// Subscribed to nothing yet: the connection is made on the first Hold.
	r.sub = o.Client.Subscribe(context.Background())
	r.done.Add(2)
	go r.publisher()
	go r.receiver()
	return r
}

func (r *RedisRelay) channel(id string) string { return r.o.Prefix + "{o:" + sessionHash(id) + "}" }

// Publish implements Relay.
func (r *RedisRelay) Publish(id string, msg []byte) bool {
	select {
	case r.q <- relayMsg{r.channel(id), msg}:
		return true
	default:
		r.o.Metrics.RedisRelayed(metrics.RedisRelayDropped)
		return false
	}
}

// Hold implements Relay.
func (r *RedisRelay) Hold(id string, deliver func([]byte)) (release func()) {
	ch := r.channel(id)
	h := &relayHolder{deliver}
	r.mu.Lock()
	first := len(r.holders[ch]) == 0
	if first {
		r.holders[ch] = map[*relayHolder]bool{}
	}
	r.holders[ch][h] = true
	r.mu.Unlock()
	if first {
		r.subscribe(ch, true)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.holders[ch], h)
			last := len(r.holders[ch]) == 0
			if last {
				delete(r.holders, ch)
			}
			r.mu.Unlock()
			if last {
				r.subscribe(ch, false)
			}
		})
	}
}

// subscribe (or unsubscribe) one channel; on failure go-redis subscribes
// it again with every other when it reconnects.
func (r *RedisRelay) subscribe(ch string, on bool) {
	ctx, cancel := context.WithTimeout(context.Background(), r.o.Timeout)
	defer cancel()
	var err error
	if on {
		err = r.sub.Subscribe(ctx, ch)
	} else {
		err = r.sub.Unsubscribe(ctx, ch)
	}
	if err != nil {
		r.o.Metrics.RedisError(metrics.RedisOpRelay)
		r.o.Logger.Debug("redis: relay (un)subscribe failed; retried on reconnect", zap.Bool("subscribe", on), zap.Error(err))
	}
}

func (r *RedisRelay) receiver() {
	defer r.done.Done()
	ch := r.sub.Channel()
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return
			}
			r.mu.Lock()
			var hs []*relayHolder
			for h := range r.holders[m.Channel] {
				hs = append(hs, h)
			}
			r.mu.Unlock()
			for _, h := range hs {
				h.deliver([]byte(m.Payload))
			}
		case <-r.stop:
			return
		}
	}
}

func (r *RedisRelay) publisher() {
	defer r.done.Done()
	backoff := time.Duration(0)
	for {
		var m relayMsg
		select {
		case m = <-r.q:
		case <-r.stop:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.o.Timeout)
		n, err := r.o.Client.Publish(ctx, m.channel, m.data).Result()
		cancel()
		switch {
		case err != nil:
			r.o.Metrics.RedisRelayed(metrics.RedisRelayFailed)
			r.o.Metrics.RedisError(metrics.RedisOpRelay)
			if backoff == 0 {
				r.o.Logger.Warn("redis: cannot relay a message to the replica holding its session's stream; dropped", zap.Error(err))
			}
			// While Redis fails, wait before the next: the queue fills
			// and drops instead of each message costing a timeout.
			backoff = min(max(2*backoff, 50*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-r.stop:
				t.Stop()
				return
			}
			continue
		case n == 0:
			r.o.Metrics.RedisRelayed(metrics.RedisRelayNoStream)
		default:
			r.o.Metrics.RedisRelayed(metrics.RedisRelayDelivered)
		}
		backoff = 0
	}
}

// Close stops the relay's goroutines (what is queued is dropped: hints).
func (r *RedisRelay) Close() {
	r.once.Do(func() {
		close(r.stop)
		_ = r.sub.Close()
		r.done.Wait()
	})
}

// RedisSubscriptions are the fleet's record of which replica holds each
// session's resource subscriptions (core.SharedSubscriptions): one key per
// subscription, "<prefix>{o:<h>}:sub:<u>" (h the session's hash, u a hash
// of upstream and URI), set if absent to the holder's replica id, expiring
// with the session's idle timeout (RedisOptions.TTL); releases are
// published on "<prefix>subs" for the holder to drop its own. Redis down:
// every replica holds what is made through it, as without a fleet.
type RedisSubscriptions struct {
	o       RedisOptions
	replica string
	sub     *redis.PubSub
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// NewRedisSubscriptions makes the record for the replica named replica.
func NewRedisSubscriptions(o RedisOptions, replica string) *RedisSubscriptions {
	o = o.withDefaults()
	return &RedisSubscriptions{o: o, replica: replica, stop: make(chan struct{}), done: make(chan struct{})}
}

func (r *RedisSubscriptions) key(session, upstream, uri string) string {
	return r.o.Prefix + "{o:" + sessionHash(session) + "}:sub:" + sessionHash(upstream+"\x00"+uri)
}

func (r *RedisSubscriptions) channel() string { return r.o.Prefix + "subs" }

// Hold implements core.SharedSubscriptions.
func (r *RedisSubscriptions) Hold(session, upstream, uri string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.o.Timeout)
	defer cancel()
	ok, err := r.o.Client.SetNX(ctx, r.key(session, upstream, uri), r.replica, r.o.TTL).Result()
	if err != nil {
		r.o.Metrics.RedisError(metrics.RedisOpSubscription)
		r.o.Logger.Warn("redis: cannot record a resource subscription; held on this replica", zap.Error(err))
		return true
	}
	if !ok {
		// Ours already (a release that did not reach Redis)?
		v, err := r.o.Client.Get(ctx, r.key(session, upstream, uri)).Result()
		return err == nil && v == r.replica
	}
	return true
}

// Release implements core.SharedSubscriptions.
func (r *RedisSubscriptions) Release(session, upstream, uri string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.o.Timeout)
	defer cancel()
	pipe := r.o.Client.Pipeline()
	pipe.Del(ctx, r.key(session, upstream, uri))
	pipe.Publish(ctx, r.channel(), r.replica+"\n"+sessionHash(session)+"\n"+upstream+"\n"+uri)
	if _, err := pipe.Exec(ctx); err != nil {
		r.o.Metrics.RedisError(metrics.RedisOpSubscription)
		r.o.Logger.Warn("redis: cannot release a resource subscription; another replica may go on holding it until the session ends there", zap.Error(err))
	}
}

// Watch implements core.SharedSubscriptions: one subscriber goroutine,
// stopped by Close.
func (r *RedisSubscriptions) Watch(drop func(match func(id string) bool, upstream, uri string)) {
	r.sub = r.o.Client.Subscribe(context.Background(), r.channel())
	go listen(r.sub, r.stop, r.done, func(payload string) {
		parts := strings.SplitN(payload, "\n", 4)
		if len(parts) != 4 || parts[0] == r.replica {
			return // malformed, or our own: dropped already
		}
		hash := parts[1]
		drop(func(id string) bool { return sessionHash(id) == hash }, parts[2], parts[3])
	})
}

// Close stops Watch's subscriber.
func (r *RedisSubscriptions) Close() {
	r.once.Do(func() {
		close(r.stop)
		if r.sub != nil {
			_ = r.sub.Close()
			<-r.done
		}
	})
}
