package core

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// CallStream carries what an upstream sends during one downstream call —
// progress, log messages, server→client requests — to that call's own
// stream, and only there: nothing of one call reaches another session.
type CallStream struct {
	ctx    context.Context // the downstream call's; ends when it is answered or abandoned
	sess   *Session
	events chan []byte // nil for a call Serve runs: its pump makes its queue
	park   *parkedCall // for 2026-07-28 callers: input requests become input_required
	pump   *pump       // a call Serve runs: started by the first message queued
}

// eventQueue is the bound on what a call's stream may fall behind by, in
// messages; a served call's is bounded in bytes too (queuebytes.go).
const eventQueue = 64

// queue is where the call's events go: the pump's (made on first use, so
// that the many calls that send nothing do not allocate one), or events.
func (cs *CallStream) queue() chan []byte {
	if cs.pump != nil {
		return cs.pump.queue()
	}
	return cs.events
}

// init makes cs the stream of one call of sess that runs in ctx.
func (cs *CallStream) init(ctx context.Context, sess *Session) {
	*cs = CallStream{ctx: ctx, sess: sess, events: make(chan []byte, eventQueue)}
}

// options are the upcall.CallOptions that route a call's messages here.
func (cs *CallStream) options() upcall.CallOptions {
	cs.sess.mu.Lock()
	level := cs.sess.logLevel
	cs.sess.mu.Unlock()
	// The stream itself handles the call's messages (upcall.CallHandler):
	// no method value made per call.
	opts := upcall.CallOptions{Handler: cs, PassInputRequired: cs.sess.Stateless(), LogLevel: level}
	if cs.park != nil {
		opts.Parked = cs.park.waiting
	}
	return opts
}

// hint queues a notification; a client too slow to read its stream loses
// hints (progress, logs), never its answer.
func (cs *CallStream) hint(method string, params json.RawMessage) {
	b, err := jsonrpc.Encode(jsonrpc.NewNotification(method, params))
	if err != nil {
		return
	}
	if cs.pump == nil {
		select {
		case cs.events <- b:
		default:
		}
		return
	}
	// A served call's queue is bounded in bytes too (queuebytes.go).
	if cs.pump.core.ReserveQueued(cs.sess, len(b)) != nil {
		return
	}
	select {
	case cs.pump.queue() <- b:
	default:
		cs.pump.core.ReleaseQueued(cs.sess, len(b))
	}
	cs.pump.kick()
}

// Progress queues a progress notification of the call (upcall.CallHandler).
func (cs *CallStream) Progress(params json.RawMessage) { cs.hint(mcp.NotificationProgress, params) }

// Notify queues another notification of the call, a log message only
// when it passes the session's threshold (upcall.CallHandler).
func (cs *CallStream) Notify(method string, params json.RawMessage) {
	if method == mcp.NotificationMessage && !cs.sess.wantsLog(params) {
		return
	}
	cs.hint(method, params)
}

// Request relays a server→client request to the downstream client and
// waits for its answer, the call's end, or the upstream giving up
// (upcall.CallHandler).
func (cs *CallStream) Request(upstreamCtx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	if missing := cs.sess.lacks(method, params); missing != "" {
		if cs.park != nil {
			// A 2026-07-28 caller is told what it lacks (-32021), as the
			// upstream would tell it directly; the upstream's request fails.
			cs.park.fail(missingCapability(missing, method))
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcpgw: the downstream client did not declare the %s capability, so %s cannot be relayed to it", missing, method)
	}
	if cs.sess.Stateless() {
		if cs.park == nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: the calling client speaks %s, which has no server→client requests, and this call cannot be bridged", cs.sess.version)
		}
		return cs.park.ask(upstreamCtx, method, params)
	}
	id, answer := cs.sess.expect()
	defer cs.sess.forgetOutgoing(id)
	b, err := jsonrpc.Encode(jsonrpc.NewRequest(id, method, params))
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: %v", err)
	}
	gone := jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: the downstream call ended before the client answered %s", method)
	q := cs.queue()
	charged := 0
	if cs.pump != nil {
		// Bounded in bytes too (queuebytes.go): past it the upstream is
		// told at once, rather than the request waiting in memory.
		if cs.pump.over() {
			return nil, gone // answered: nobody drains the queue any more
		}
		if r := cs.pump.core.ReserveQueued(cs.sess, len(b)); r != nil {
			return nil, r.JSONRPC()
		}
		charged = len(b)
		cs.pump.kick() // before the send, which waits for a reader when the stream is full
	}
	select {
	case q <- b:
	case <-cs.ctx.Done():
		cs.releaseUnsent(charged)
		return nil, gone
	case <-upstreamCtx.Done():
		cs.releaseUnsent(charged)
		return nil, gone
	}
	select {
	case resp := <-answer:
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-cs.ctx.Done():
		return nil, gone
	case <-upstreamCtx.Done():
		return nil, gone
	}
}

// releaseUnsent releases the charge of a message that never entered the
// queue.
func (cs *CallStream) releaseUnsent(n int) {
	if n > 0 {
		cs.pump.core.ReleaseQueued(cs.sess, n)
	}
}

// lacks names the client capability method needs that the session did not
// declare, or "" when it has it.
func (s *Session) lacks(method string, params json.RawMessage) string {
	has := func(path ...string) bool {
		v, ok := rawjson.Lookup(s.caps, path)
		return ok && string(v) != "null"
	}
	if need := mcp.Method(method).ClientCapability; need != "" && !has(need) {
		return need
	}
	if method == mcp.MethodElicitationCreate { // and the mode it asks for
		mode, _ := rawjson.GetString(params, "mode")
		if mode == "url" && !has("elicitation", "url") {
			return "elicitation.url"
		}
		// An empty elicitation object means form mode (2025-06-18 clients).
		if mode != "url" && !has("elicitation", "form") {
			el, _ := rawjson.Get(s.caps, "elicitation")
			if f, _ := rawjson.Fields(el); len(f) > 0 {
				return "elicitation.form"
			}
		}
	}
	return ""
}

// logLevels are the syslog severities MCP uses, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// wantsLog reports whether a notifications/message passes the session's
// logging/setLevel threshold (everything passes until one is set).
func (s *Session) wantsLog(params json.RawMessage) bool {
	s.mu.Lock()
	min := s.logLevel
	s.mu.Unlock()
	if min == "" {
		// A session: everything until setLevel. 2026-07-28: nothing unless the
		// request asked for a level in its _meta.
		return !s.Stateless()
	}
	level, _ := rawjson.GetString(params, "level")
	return slices.Index(logLevels, level) >= slices.Index(logLevels, min)
}
