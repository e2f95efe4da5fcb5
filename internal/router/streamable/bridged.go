package streamable

import (
	"net/http"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// streamDelay is how long a stateless routed request answers nothing: an
// error with an HTTP status of its own (a refused request, a missing
// capability) goes out as plain JSON before any event stream starts.
const streamDelay = 50 * time.Millisecond

// bridged answers a stateless routed request: a fresh one, or the retry of
// one that returned input_required (its requestState is the gateway's).
// v is the request's access decision.
func (t *Transport) bridged(w http.ResponseWriter, r *http.Request, sess *core.Session, msg *jsonrpc.Message, v *core.Verdict) {
	var state string
	if p := v.Params(); p != nil {
		state = p.State // as the edge read it
	} else {
		state, _ = rawjson.GetString(msg.Params, "requestState")
	}
	if !core.IsBridgeState(state) {
		if t.core.Unbridged(r.Context(), v) {
			t.direct(w, r, sess, msg, v)
			return
		}
		t.drive(w, r, t.core.StartBridged(sess, msg, v, nil), msg.ID)
		return
	}
	call, home, err := t.core.Resume(sess, msg)
	if err == nil && home != "" {
		if err = t.forwardRetry(w, r, home, msg); err == nil {
			return
		}
		t.core.Metrics().BridgeRound(metrics.BridgeRefused)
	}
	if err != nil {
		statelessError(w, msg.ID, err)
		return
	}
	t.drive(w, r, call, msg.ID)
}

// statelessStream is a stateless request's answer: plain JSON, unless the
// call outlasts streamDelay with something to stream (progress, log
// messages), when the client accepts an event stream. A call with nothing
// to stream answers plain JSON however long it takes: an event stream
// started empty would only add a write and a flush to the call (and under
// load, when queueing alone pushes small calls past the delay, to most
// calls) and cost the answer its own HTTP status.
type statelessStream struct {
	w         http.ResponseWriter
	streaming bool        // the client accepts an event stream
	held      bool        // streamDelay has passed: an event starts the stream
	sw        *sse.Writer // the stream, once started
	early     [][]byte    // events before the stream starts
}

// maxEarly bounds the events kept before the stream starts: an upstream
// that sends more within streamDelay has plenty to stream, and the
// stream starts at once instead of the gateway holding them all.
const maxEarly = 64

// Emit writes an event of the call, or keeps it until the stream starts.
func (st *statelessStream) Emit(b []byte) {
	if st.sw == nil && st.streaming && (st.held || len(st.early) >= maxEarly) {
		st.start()
	}
	switch {
	case st.sw != nil:
		_ = st.sw.Write(sse.Event{Data: b})
	case st.streaming:
		st.early = append(st.early, b)
	}
}

// HoldPassed starts the stream once streamDelay has passed, if there is
// something to stream; else the first event will.
func (st *statelessStream) HoldPassed() {
	st.held = true
	if st.streaming && st.sw == nil && len(st.early) > 0 {
		st.start()
	}
}

// QuietHold tells core.Serve that the hold matters only once the call has
// emitted something: a call that has not needs no pump at its hold.
func (*statelessStream) QuietHold() {}

func (st *statelessStream) start() {
	st.sw = sse.NewWriter(st.w)
	for _, b := range st.early {
		_ = st.sw.Write(sse.Event{Data: b})
	}
	st.early = nil
}

// answer writes the call's answer: JSON with the status its error calls
// for when nothing was streamed, else the stream's last event.
func (st *statelessStream) answer(resp *jsonrpc.Message) {
	if st.sw == nil {
		if !st.streaming || len(st.early) == 0 || resp.Error != nil {
			status := http.StatusOK
			if resp.Error != nil {
				status = core.StatelessStatus(resp.Error.Code)
			}
			edge.WriteJSON(st.w, status, resp)
			return
		}
		st.start()
	}
	// Sent with the response's end; a large result straight from the
	// upstream's buffer (jsonrpc.Buffers), not copied.
	_ = st.sw.WriteLastPieces(sse.Event{}, jsonrpc.Buffers(resp))
}

// direct answers a stateless routed request whose upstream asks nothing
// of the caller mid-call (core.Unbridged): a plain call on this goroutine,
// no parking, the stream delay on the core's one hold timer. The call
// ends with the request: closing it cancels the call, as 2026-07-28 says.
func (t *Transport) direct(w http.ResponseWriter, r *http.Request, sess *core.Session, msg *jsonrpc.Message, v *core.Verdict) {
	// The caller's own Mcp-Param-* headers stop here (checked against the
	// body, checkParamHeaders): an upstream gets only those the gateway
	// mirrors from the arguments of a tool it knows (catalog
	// paramheaders.go), never a header nobody checked.
	ctx := r.Context()
	st := &statelessStream{w: w, streaming: edge.Accepts(r, mcp.ContentTypeEventStream)}
	resp := t.core.StatelessResult(msg.Method, t.core.Serve(ctx, sess, msg, v, st, streamDelay))
	resp.ID = msg.ID
	st.answer(resp)
}

// drive carries a bridged call to this HTTP request: its answer, or the
// input requests it needs (input_required; the call stays parked). Progress
// and log messages stream meanwhile when the client accepts a stream.
func (t *Transport) drive(w http.ResponseWriter, r *http.Request, call *core.Call, id jsonrpc.ID) {
	defer call.Release()
	st := &statelessStream{w: w, streaming: edge.Accepts(r, mcp.ContentTypeEventStream)}
	start := t.core.After(streamDelay) // the core's one hold timer: no timer armed and stopped per request
	for {
		out := call.Next(r.Context().Done(), start, st.Emit)
		switch {
		case out.Stopped:
			return
		case out.Woke:
			start = nil
			st.HoldPassed()
		case out.Err != nil:
			if out.Refusal != nil && st.sw == nil {
				out.Refusal.Write(w, id) // 503 or 429 with Retry-After
				return
			}
			finish(w, st.sw, jsonrpc.NewError(id, out.Err))
			return
		case out.InputRequired != nil:
			// Parked before the client can read the answer: its retry may
			// arrive before this handler has returned, and must find the
			// call released, not "already being retried".
			call.Release()
			res := jsonrpc.NewResult(id, out.InputRequired)
			if st.sw != nil {
				b, _ := jsonrpc.Encode(res)
				_ = st.sw.Write(sse.Event{Data: b})
				return
			}
			edge.WriteJSON(w, http.StatusOK, res)
			return
		default:
			resp := out.Resp
			resp.ID = id
			st.answer(resp)
			return
		}
	}
}

// finish writes a final error: on the stream when one is open, else as the
// HTTP response with the status its code calls for.
func finish(w http.ResponseWriter, sw *sse.Writer, e *jsonrpc.Message) {
	if sw != nil {
		if b, err := jsonrpc.Encode(e); err == nil {
			_ = sw.Write(sse.Event{Data: b})
		}
		return
	}
	edge.WriteJSON(w, core.StatelessStatus(e.Error.Code), e)
}
