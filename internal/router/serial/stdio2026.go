package serial

import (
	"context"
	"sync"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// 2026-07-28 over stdio. A request that says it is one (server/discover, or
// its _meta names a protocol version) is served statelessly, as on
// Streamable HTTP and through the same core: it carries its caller's
// version and capabilities, needs no initialize, and may share the
// connection with an initialized session's requests. Routed requests run
// as bridged calls (a legacy upstream's input requests come back as an
// input_required result; the client retries with inputResponses on another
// line), and subscriptions/listen keeps its request open, its tagged
// notifications written as lines, until the client cancels it
// (notifications/cancelled, after which it gets no answer) or its input
// ends or the gateway drains (then it gets its result).

// modern is a stdio connection's 2026-07-28 state.
type modern struct {
	eofOnce sync.Once
	eof     chan struct{} // closed when stdin ended: listen streams answer and end
}

func newModern() *modern { return &modern{eof: make(chan struct{})} }

// inputEnded ends the connection's listen streams (with their results).
func (m *modern) inputEnded() { m.eofOnce.Do(func() { close(m.eof) }) }

// statelessLocked starts answering a 2026-07-28 request, registered for
// notifications/cancelled on the connection's session before it returns.
func (c *pushConn) statelessLocked(msg *jsonrpc.Message, p *mcp.Params) {
	m, jerr := core.StatelessMetaOf(p)
	if jerr == nil {
		jerr = m.CheckVersion()
	}
	if jerr != nil {
		c.replyLocked(jsonrpc.NewError(msg.ID, jerr))
		return
	}
	ctx, cancel := context.WithCancel(c.sess.Context()) // the connection's end cancels it
	c.sess.Track(msg.ID, cancel)
	c.goLocked(func() {
		defer c.sess.Untrack(msg.ID)
		defer cancel()
		if resp := c.stateless(ctx, m, msg, p); resp != nil {
			c.emitMessage(resp)
		}
	})
}

// stateless answers one 2026-07-28 request; nil when it has no answer to
// give (cancelled by the client, or the connection ended).
func (c *pushConn) stateless(ctx context.Context, m core.StatelessMeta, msg *jsonrpc.Message, p *mcp.Params) *jsonrpc.Message {
	rte := c.sess.Route()
	sess := core.NewRequestSession(ctx, rte, m.Version, m.Caps, m.Info, c.sess.Owner(), m.Level, msg.Method == mcp.MethodSubscriptionsListen)
	defer sess.End()
	cr := c.t.core
	switch msg.Method {
	case mcp.MethodServerDiscover:
		return jsonrpc.NewResult(msg.ID, cr.Discover(ctx, rte))
	case mcp.MethodSubscriptionsListen:
		return c.listen(ctx, sess, msg)
	}
	if jerr := core.CheckStatelessMethod(msg.Method, m.Version); jerr != nil {
		return jsonrpc.NewError(msg.ID, jerr)
	}
	if !mcp.Routed(msg.Method) {
		return cr.StatelessResult(msg.Method, cr.Handle(ctx, sess, msg, nil, nil))
	}
	var call *core.Call
	if core.IsBridgeState(p.State) {
		var home string
		var jerr *jsonrpc.Error
		call, home, jerr = cr.Resume(sess, msg)
		if jerr == nil && home != "" {
			// Only an HTTP replica's requestState names another one.
			jerr = jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "requestState names a call parked on %s, not on this stdio gateway; send the request again without requestState", home)
		}
		if jerr != nil {
			return jsonrpc.NewError(msg.ID, jerr)
		}
	} else {
		call = cr.StartBridged(sess, msg, cr.DecideParams(ctx, rte, msg, p), nil)
	}
	defer call.Release()
	out := call.Next(ctx.Done(), nil, c.event)
	switch {
	case out.Stopped:
		return nil
	case out.Err != nil:
		return jsonrpc.NewError(msg.ID, out.Err)
	case out.InputRequired != nil:
		return jsonrpc.NewResult(msg.ID, out.InputRequired)
	}
	resp := out.Resp
	resp.ID = msg.ID
	return resp
}

// listen serves subscriptions/listen: the acknowledgement, then the
// stream's notifications, until it ends.
func (c *pushConn) listen(ctx context.Context, sess *core.Session, msg *jsonrpc.Message) *jsonrpc.Message {
	ack, end, jerr := c.t.core.OpenListen(ctx, sess, msg)
	if jerr != nil {
		return jsonrpc.NewError(msg.ID, jerr)
	}
	defer end()
	if !c.emit(ack) {
		return nil
	}
	for {
		select {
		case <-ctx.Done(): // cancelled, or the connection ended
			return nil
		case <-c.modern.eof:
			return core.ListenResult(sess, msg.ID)
		case <-c.t.core.Draining():
			return core.ListenResult(sess, msg.ID)
		case b := <-sess.Outbox():
			if !c.emit(b) {
				return nil
			}
		}
	}
}
