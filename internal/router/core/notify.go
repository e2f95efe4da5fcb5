package core

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// listChangeDebounce coalesces list_changed notifications: one flapping
// upstream cannot flood every client.
const listChangeDebounce = 200 * time.Millisecond

// How long the core waits on an upstream for the subscription work it does
// on its own (Close ends it sooner).
const (
	unsubscribeTimeout = 5 * time.Second  // the last subscriber of a resource left
	restoreTimeout     = 30 * time.Second // an upstream reconnected: subscribe again
)

type listChange struct{ upstream, method string }

// UpstreamNotification takes a notification an upstream sent outside any
// call and delivers it to the sessions it concerns.
func (c *Core) UpstreamNotification(upstream, method string, params json.RawMessage) {
	switch {
	case mcp.IsListChanged(method):
		c.ListChanged(upstream, method)
	case method == mcp.NotificationResourceUpdated:
		c.resourceUpdated(upstream, params)
	case method == mcp.NotificationTasksStatus:
		c.taskStatus(upstream, "", params)
	default:
		// Log messages outside a call belong to no session we can name:
		// sending them to everyone would cross sessions.
		c.log.Debug("upstream notification outside any call", zap.String("upstream", upstream), zap.String("method", method))
	}
}

// ListChanged queues a list_changed notification for every session whose
// route includes upstream.
func (c *Core) ListChanged(upstream, method string) {
	select {
	case c.changes <- listChange{upstream, method}:
	case <-c.stop:
	}
}

// coalesce batches list changes for listChangeDebounce, then notifies each
// affected session once per method.
func (c *Core) coalesce() {
	defer c.wg.Done()
	pending := map[string]map[string]bool{} // method -> upstreams
	var fire <-chan time.Time
	for {
		select {
		case <-c.stop:
			return
		case c := <-c.changes:
			if pending[c.method] == nil {
				pending[c.method] = map[string]bool{}
			}
			pending[c.method][c.upstream] = true
			if fire == nil {
				fire = time.After(listChangeDebounce)
			}
		case <-fire:
			fire = nil
			for method, ups := range pending {
				b, _ := jsonrpc.Encode(jsonrpc.NewNotification(method, nil))
				for _, s := range c.opts.Sessions.All() {
					if slices.ContainsFunc(s.Route().View.Upstreams(), func(u string) bool { return ups[u] }) {
						s.SendHere(b) // every replica hears its own upstreams' changes
					}
				}
				for _, s := range c.listenersFor(method, ups) {
					if tb, err := jsonrpc.Encode(jsonrpc.NewNotification(method, s.Tag(nil))); err == nil {
						s.Send(tb)
					}
				}
			}
			clear(pending)
		}
	}
}

// subscriptions reference-counts resource subscriptions per upstream URI,
// so an upstream sees one subscribe however many sessions watch a resource.
type subscriptions struct {
	mu   sync.Mutex
	subs map[subKey]map[*Session]bool
	// How many of subs each session and each principal holds, for their
	// bounds (subbounds.go).
	perSession   map[*Session]int
	perPrincipal map[string]int
}

// subKey names one upstream subscription. session is set for a stateful
// upstream, where every session subscribes on its own connection.
type subKey struct{ upstream, uri, session string }

func newSubscriptions() *subscriptions {
	return &subscriptions{subs: map[subKey]map[*Session]bool{}, perSession: map[*Session]int{}, perPrincipal: map[string]int{}}
}

// subscribe handles resources/subscribe for sess (Handle calls it, after the guard).
func (c *Core) subscribe(ctx context.Context, sess *Session, msg *jsonrpc.Message) *jsonrpc.Message {
	if uri, ok := rawjson.GetString(msg.Params, "uri"); ok {
		if jerr := c.checkSubscriptionURI(sess, uri); jerr != nil {
			return jsonrpc.NewError(msg.ID, jerr)
		}
	}
	key, ok := c.subKey(sess, msg.Params)
	if !ok {
		// Let Forward produce the precise "unknown resource" error.
		_, gerr := sess.Route().View.Forward(ctx, msg.Method, msg.Params, upcall.CallOptions{})
		return jsonrpc.NewError(msg.ID, gerr)
	}
	st := c.subs
	st.mu.Lock()
	set := st.subs[key]
	if set[sess] {
		st.mu.Unlock()
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	}
	st.mu.Unlock()
	if c.shared(sess, key) && !c.opts.Shared.Hold(sess.id, key.upstream, key.uri) {
		// Another replica holds it, and relays its updates to the stream.
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	}
	st.mu.Lock()
	set = st.subs[key]
	if set[sess] {
		st.mu.Unlock()
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	}
	if r := st.admitLocked(sess); r != nil {
		st.mu.Unlock()
		if c.shared(sess, key) {
			c.opts.Shared.Release(sess.id, key.upstream, key.uri)
		}
		return jsonrpc.NewError(msg.ID, c.refuse(r))
	}
	first := len(set) == 0
	if set == nil {
		set = map[*Session]bool{}
		st.subs[key] = set
	}
	set[sess] = true
	st.mu.Unlock()
	if !first {
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	}
	resp, gerr := sess.Route().View.Forward(ctx, msg.Method, msg.Params, upcall.CallOptions{})
	if gerr != nil || resp.Error != nil {
		c.dropSubscription(sess, key, false)
		if gerr != nil {
			return jsonrpc.NewError(msg.ID, gerr)
		}
	}
	resp.ID = msg.ID
	return resp
}

// unsubscribe handles resources/unsubscribe for sess.
func (c *Core) unsubscribe(ctx context.Context, sess *Session, msg *jsonrpc.Message) *jsonrpc.Message {
	key, ok := c.subKey(sess, msg.Params)
	if !ok {
		_, gerr := sess.Route().View.Forward(ctx, msg.Method, msg.Params, upcall.CallOptions{})
		return jsonrpc.NewError(msg.ID, gerr)
	}
	if !c.dropSubscription(sess, key, true) && c.shared(sess, key) {
		// Not held here: wherever it is, it goes.
		c.opts.Shared.Release(sess.id, key.upstream, key.uri)
	}
	return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
}

// shared reports whether sess's subscription to key is the fleet's
// business: a stored session's, on a shared upstream connection (a
// stateful upstream's are per session, on the replica serving it).
func (c *Core) shared(sess *Session, key subKey) bool {
	return c.opts.Shared != nil && sess.id != "" && key.session == ""
}

// releasedElsewhere drops, here, a subscription another replica released
// (Shared.Watch).
func (c *Core) releasedElsewhere(match func(id string) bool, upstream, uri string) {
	key := subKey{upstream: upstream, uri: uri}
	c.subs.mu.Lock()
	var held []*Session
	for s := range c.subs.subs[key] {
		if s.id != "" && match(s.id) {
			held = append(held, s)
		}
	}
	c.subs.mu.Unlock()
	for _, s := range held {
		c.Go(func() { c.drop(s, key, true, false) })
	}
}

// dropSubscription removes sess from key's subscribers (and the fleet's
// record of it) and, when it was the last one and tell is set,
// unsubscribes upstream. It reports whether sess held key here.
func (c *Core) dropSubscription(sess *Session, key subKey, tell bool) bool {
	return c.drop(sess, key, tell, true)
}

func (c *Core) drop(sess *Session, key subKey, tell, release bool) bool {
	st := c.subs
	st.mu.Lock()
	set := st.subs[key]
	had := set[sess]
	delete(set, sess)
	if had {
		st.releaseLocked(sess)
	}
	last := had && len(set) == 0
	if last {
		delete(st.subs, key)
	}
	st.mu.Unlock()
	if had && release && c.shared(sess, key) {
		c.opts.Shared.Release(sess.id, key.upstream, key.uri)
	}
	if !last || !tell {
		return had
	}
	if _, ok := c.host.Stateful(key.upstream); !ok || (key.session != "" && sess.ctx.Err() != nil) {
		return true // a stateful upstream's connection closes with its session
	}
	ctx, cancel := context.WithTimeout(c.ctx, unsubscribeTimeout)
	defer cancel()
	if err := c.upstreamSubscription(upcall.WithSession(ctx, key.session), key.upstream, mcp.MethodResourcesUnsubscribe, key.uri); err != nil {
		c.log.Debug("upstream unsubscribe failed", zap.String("upstream", key.upstream), zap.Error(err))
	}
	return true
}

// upstreamSubscription sends resources/subscribe or unsubscribe for uri
// (the upstream's own) on the connection subscriptions use: the session-revision one
// of a dual-stack upstream, the session's own of a stateful one.
func (c *Core) upstreamSubscription(ctx context.Context, upstream, method, uri string) error {
	params, _ := json.Marshal(map[string]string{"uri": uri})
	resp, err := c.host.SubscriptionCall(ctx, upstream, method, params)
	if err == nil && resp.Error != nil {
		return resp.Error
	}
	return err
}

// EndSubscriptions drops every subscription of an ended session, in the
// background (owned by the router) so that ending a session never waits on
// an upstream.
func (c *Core) EndSubscriptions(sess *Session) {
	st := c.subs
	var keys []subKey
	st.mu.Lock()
	for k, set := range st.subs {
		if set[sess] {
			keys = append(keys, k)
		}
	}
	st.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	c.Go(func() {
		for _, k := range keys {
			c.dropSubscription(sess, k, true)
		}
	}) // closing: the upstreams go too
}

func (c *Core) subKey(sess *Session, params json.RawMessage) (subKey, bool) {
	uri, ok := rawjson.GetString(params, "uri")
	if !ok {
		return subKey{}, false
	}
	up, internal, ok := sess.Route().View.Resolve(true, uri)
	if !ok {
		return subKey{}, false
	}
	key := subKey{upstream: up, uri: internal}
	if stateful, _ := c.host.Stateful(up); stateful {
		key.session = sess.id
	}
	return key, true
}

// UpstreamReady restores the subscriptions sessions hold on an upstream
// that (re)connected: a restarted child, a reconnected server or one a
// reload replaced knows nothing of them, and its updates would otherwise
// stop without anyone being told. Per-session connections (stateful) are
// left to their sessions.
func (c *Core) UpstreamReady(upstream string) {
	st := c.subs
	st.mu.Lock()
	var uris []string
	for k, set := range st.subs {
		if k.upstream == upstream && k.session == "" && len(set) > 0 {
			uris = append(uris, k.uri)
		}
	}
	st.mu.Unlock()
	if len(uris) == 0 {
		return
	}
	c.Go(func() {
		if _, ok := c.host.Stateful(upstream); !ok {
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, restoreTimeout)
		defer cancel()
		restored := 0
		for _, uri := range uris {
			if err := c.upstreamSubscription(ctx, upstream, mcp.MethodResourcesSubscribe, uri); err != nil {
				c.log.Warn("could not restore a resource subscription on a reconnected upstream", zap.String("upstream", upstream), zap.String("uri", uri), zap.Error(err))
				continue
			}
			restored++
		}
		c.log.Info("restored resource subscriptions on a reconnected upstream", zap.String("upstream", upstream), zap.Int("restored", restored), zap.Int("held", len(uris)))
	})
}

// resourceUpdated fans an upstream's notifications/resources/updated out to
// exactly the sessions subscribed to that URI, each in its route's naming.
func (c *Core) resourceUpdated(upstream string, params json.RawMessage) {
	uri, ok := rawjson.GetString(params, "uri")
	if !ok {
		return
	}
	st := c.subs
	st.mu.Lock()
	var targets []*Session
	for s := range st.subs[subKey{upstream: upstream, uri: uri}] {
		targets = append(targets, s)
	}
	st.mu.Unlock()
	for _, s := range targets {
		p, err := rawjson.SetString(params, "uri", s.Route().View.External(true, upstream, uri))
		if err != nil {
			continue
		}
		p = s.Tag(p)
		b, err := jsonrpc.Encode(jsonrpc.NewNotification(mcp.NotificationResourceUpdated, p))
		if err == nil && !s.Send(b) {
			c.log.Debug("dropped a resource update for a session without a reader", zap.String("upstream", upstream))
		}
	}
}

// SessionNotification takes what a stateful upstream's per-session
// connection sent outside any call: it concerns that session only.
func (c *Core) SessionNotification(session, upstream, method string, params json.RawMessage) {
	if method == mcp.NotificationTasksStatus {
		c.taskStatus(upstream, session, params)
		return
	}
	s := c.opts.Sessions.Lookup(session)
	if s == nil {
		return
	}
	switch method {
	case mcp.NotificationResourceUpdated:
		uri, ok := rawjson.GetString(params, "uri")
		if !ok {
			return
		}
		c.subs.mu.Lock()
		subscribed := c.subs.subs[subKey{upstream: upstream, uri: uri, session: session}][s]
		c.subs.mu.Unlock()
		if !subscribed {
			return
		}
		p, err := rawjson.SetString(params, "uri", s.Route().View.External(true, upstream, uri))
		if err != nil {
			return
		}
		params = p
	case mcp.NotificationMessage:
		if !s.wantsLog(params) {
			return
		}
	default:
		if !mcp.IsListChanged(method) {
			return
		}
	}
	if b, err := jsonrpc.Encode(jsonrpc.NewNotification(method, params)); err == nil {
		s.Send(b)
	}
}

// taskStatus delivers an upstream's notifications/tasks/status (sent outside
// any call) to the session that created the task, and to no other.
func (c *Core) taskStatus(upstream, session string, params json.RawMessage) {
	if c.opts.TaskNotification == nil {
		return
	}
	sid, p, ok := c.opts.TaskNotification(upstream, session, params)
	if !ok {
		return
	}
	if s := c.opts.Sessions.Lookup(sid); s != nil {
		if b, err := jsonrpc.Encode(jsonrpc.NewNotification(mcp.NotificationTasksStatus, p)); err == nil {
			s.Send(b)
		}
	}
}
