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
	state, _ := rawjson.GetString(msg.Params, "requestState")
	if !core.IsBridgeState(state) {
		t.drive(w, r, t.core.StartBridged(sess, msg, v, paramHeaders(r.Header)), msg.ID)
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

// paramHeaders are a request's Mcp-Param-* headers.
func paramHeaders(h http.Header) http.Header {
	var out http.Header
	for k, v := range h {
		if mcp.IsParamHeader(k) {
			if out == nil {
				out = http.Header{}
			}
			out[k] = v
		}
	}
	return out
}

// drive carries a bridged call to this HTTP request: its answer, or the
// input requests it needs (input_required; the call stays parked). Progress
// and log messages stream meanwhile when the client accepts a stream.
func (t *Transport) drive(w http.ResponseWriter, r *http.Request, call *core.Call, id jsonrpc.ID) {
	defer call.Release()
	var sw *sse.Writer
	streaming := edge.Accepts(r, mcp.ContentTypeEventStream)
	var early [][]byte // events before the stream starts
	emit := func(b []byte) {
		switch {
		case sw != nil:
			_ = sw.Write(sse.Event{Data: b})
		case streaming:
			early = append(early, b)
		}
	}
	startStream := func() {
		sw = sse.NewWriter(w)
		for _, b := range early {
			_ = sw.Write(sse.Event{Data: b})
		}
		early = nil
	}
	start := t.core.After(streamDelay) // the core's one hold timer: no timer armed and stopped per request
	for {
		out := call.Next(r.Context().Done(), start, emit)
		switch {
		case out.Stopped:
			return
		case out.Woke:
			start = nil
			if streaming && sw == nil {
				startStream()
			}
		case out.Err != nil:
			if out.Refusal != nil && sw == nil {
				out.Refusal.Write(w, id) // 503 or 429 with Retry-After
				return
			}
			finish(w, sw, jsonrpc.NewError(id, out.Err))
			return
		case out.InputRequired != nil:
			// Parked before the client can read the answer: its retry may
			// arrive before this handler has returned, and must find the
			// call released, not "already being retried".
			call.Release()
			res := jsonrpc.NewResult(id, out.InputRequired)
			if sw != nil {
				b, _ := jsonrpc.Encode(res)
				_ = sw.Write(sse.Event{Data: b})
				return
			}
			edge.WriteJSON(w, http.StatusOK, res)
			return
		default:
			resp := out.Resp
			resp.ID = id
			if sw == nil {
				if !streaming || len(early) == 0 || resp.Error != nil {
					status := http.StatusOK
					if resp.Error != nil {
						status = core.StatelessStatus(resp.Error.Code)
					}
					edge.WriteJSON(w, status, resp)
					return
				}
				startStream()
			}
			// Sent with the response's end; a large result straight from
			// the upstream's buffer (jsonrpc.Buffers), not copied.
			_ = sw.WriteLastPieces(sse.Event{}, jsonrpc.Buffers(resp))
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
