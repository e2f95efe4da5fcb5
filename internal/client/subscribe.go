package client

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// 2026-07-28 has no resources/subscribe or resources/unsubscribe: a client
// names the resources it watches in the params of its subscriptions/listen
// stream. So on a stateless upstream the client answers those two methods
// itself, keeping the set of watched URIs and replacing the one listen stream
// with one that names the new set. The replacement is acknowledged before
// the old stream is cancelled, so no update falls in between.

// listening is the client's subscriptions/listen stream and what it watches.
type listening struct {
	switchMu sync.Mutex // one replacement at a time, held until it is done

	mu   sync.Mutex
	cur  *listenStream // nil when there is nothing to listen for
	uris []string      // the resources cur watches
}

// listenStream is one subscriptions/listen request, reopened with backoff
// on failure until cancelled.
type listenStream struct {
	cancel context.CancelFunc
	once   sync.Once
	first  chan listenAck // buffered 1: how the first attempt went
}

// listenAck is the outcome of opening a stream: what the upstream agreed to
// deliver, or why it ended before saying.
type listenAck struct {
	notifications mcp.ListenFilter
	err           error
}

func (s *listenStream) report(a listenAck) {
	s.once.Do(func() { s.first <- a })
}

// goListen opens the stream for the list changes a stateless upstream
// announces, right after the handshake.
func (c *Client) goListen() {
	if want := c.listenFor(nil); !want.Empty() {
		c.subs.mu.Lock()
		c.subs.cur = c.startListen(want)
		c.subs.mu.Unlock()
	}
}

// listenFor is what to listen for: the list changes the upstream's
// capabilities announce, and uris.
func (c *Client) listenFor(uris []string) mcp.ListenFilter {
	var caps struct {
		Tools, Prompts, Resources struct {
			ListChanged bool `json:"listChanged"`
		}
	}
	_ = json.Unmarshal(c.init.Capabilities, &caps)
	return mcp.ListenFilter{
		ToolsListChanged:      caps.Tools.ListChanged,
		PromptsListChanged:    caps.Prompts.ListChanged,
		ResourcesListChanged:  caps.Resources.ListChanged,
		ResourceSubscriptions: uris,
	}
}

// startListen opens a stream for want on a goroutine the client owns; nil
// once the client is closed.
func (c *Client) startListen(want mcp.ListenFilter) *listenStream {
	ctx, cancel := context.WithCancel(c.ctx)
	s := &listenStream{cancel: cancel, first: make(chan listenAck, 1)}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.wg.Add(1)
	}
	c.mu.Unlock()
	if closed {
		cancel()
		return nil
	}
	go func() {
		defer c.wg.Done()
		defer s.report(listenAck{err: ErrClosed})
		c.runListen(ctx, s, want)
	}()
	return s
}

// runListen holds s open until ctx ends, always with the set it was opened
// for: that is the current set for as long as s is the current stream.
func (c *Client) runListen(ctx context.Context, s *listenStream, want mcp.ListenFilter) {
	params, _ := json.Marshal(map[string]any{"notifications": want})
	var acked atomic.Bool
	notify := func(method string, p json.RawMessage) {
		if method != mcp.NotificationSubscriptionsAcked {
			if c.opts.OnNotification != nil {
				c.opts.OnNotification(method, dropSubscriptionID(p))
			}
			return
		}
		var a struct {
			Notifications mcp.ListenFilter `json:"notifications"`
		}
		_ = json.Unmarshal(p, &a)
		if acked.CompareAndSwap(false, true) {
			s.report(listenAck{notifications: a.Notifications})
			return
		}
		// Reopened: nobody waits for this answer, but a lost subscription should show.
		for _, uri := range want.ResourceSubscriptions {
			if !slices.Contains(a.Notifications.ResourceSubscriptions, uri) {
				c.log.Warn("upstream refused a resource subscription when the listen stream was reopened", zap.String("uri", uri))
			}
		}
	}
	backoff := time.Second
	for {
		start := time.Now()
		resp, err := c.Call(ctx, mcp.MethodSubscriptionsListen, params, CallOptions{Notify: notify, Background: true})
		if ctx.Err() != nil {
			return
		}
		if err == nil && resp.Error != nil {
			err = resp.Error
		}
		if err == nil {
			err = errors.New("the upstream ended the stream")
		}
		s.report(listenAck{err: err})
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		c.log.Debug("upstream subscriptions/listen ended; reopening", zap.Error(err), zap.Duration("in", backoff))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// subscription serves resources/subscribe and resources/unsubscribe for a
// stateless upstream. Its answers are like an upstream's: the caller sets
// the id.
func (c *Client) subscription(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	uri, ok := rawjson.GetString(params, "uri")
	if !ok {
		return jsonrpc.NewError(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: params.uri is required", method)), nil
	}
	subscribe := method == mcp.MethodResourcesSubscribe
	if subscribe && !c.canSubscribe() {
		return jsonrpc.NewError(nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "upstream %q does not support resource subscriptions", c.opts.Name)), nil
	}
	l := &c.subs
	l.switchMu.Lock()
	defer l.switchMu.Unlock()
	l.mu.Lock()
	uris, old := l.uris, l.cur
	l.mu.Unlock()
	if slices.Contains(uris, uri) == subscribe {
		return jsonrpc.NewResult(nil, json.RawMessage(`{}`)), nil // nothing changes
	}
	var next []string
	if subscribe {
		next = append(slices.Clone(uris), uri)
	} else {
		next = slices.DeleteFunc(slices.Clone(uris), func(u string) bool { return u == uri })
	}
	var s *listenStream
	if want := c.listenFor(next); !want.Empty() {
		if s = c.startListen(want); s == nil {
			return nil, ErrClosed
		}
		var a listenAck
		select {
		case a = <-s.first:
		case <-ctx.Done():
			s.cancel()
			return nil, c.ctxErr(ctx, method)
		}
		switch {
		case errors.Is(a.err, ErrClosed):
			s.cancel()
			return nil, c.closedErr()
		case a.err != nil:
			// The listen itself failed (an upstream may refuse it whole
			// for one resource it will not watch): the old one stays.
			s.cancel()
			code, why := jsonrpc.CodeInternalError, a.err.Error()
			var jerr *jsonrpc.Error
			if errors.As(a.err, &jerr) {
				why = jerr.Message
				if jerr.Code != 0 {
					code = jerr.Code
				}
			}
			return jsonrpc.NewError(nil, jsonrpc.Errorf(code, "upstream %q did not open subscriptions/listen for %s %s: %s", c.opts.Name, method, uri, why)), nil
		case subscribe && !slices.Contains(a.notifications.ResourceSubscriptions, uri):
			s.cancel()
			return jsonrpc.NewError(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "upstream %q refused the subscription to %s", c.opts.Name, uri)), nil
		}
	}
	l.mu.Lock()
	l.uris, l.cur = next, s
	l.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	return jsonrpc.NewResult(nil, json.RawMessage(`{}`)), nil
}

// canSubscribe reports whether the upstream announced resources.subscribe.
func (c *Client) canSubscribe() bool {
	var caps struct {
		Resources struct {
			Subscribe bool `json:"subscribe"`
		} `json:"resources"`
	}
	return json.Unmarshal(c.init.Capabilities, &caps) == nil && caps.Resources.Subscribe
}

// subscriptionID is the listen stream a notification says it belongs to.
func subscriptionID(params json.RawMessage) jsonrpc.ID {
	meta, _ := rawjson.Get(params, "_meta")
	id, ok := rawjson.Get(meta, mcp.MetaSubscriptionID)
	if !ok {
		return nil
	}
	return jsonrpc.ID(id)
}

// dropSubscriptionID removes the upstream's per-hop keys (its
// subscription id names the gateway's stream, not anything the gateway's
// clients opened); the router adds what its own clients need.
func dropSubscriptionID(params json.RawMessage) json.RawMessage {
	out, err := mcp.WithoutHopMeta(params)
	if err != nil {
		return params
	}
	return out
}
