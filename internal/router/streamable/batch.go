package streamable

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// batchBound is the config key that bounds a batch: its requests are in
// flight on the session at once, as that many single POSTs would be.
const batchBound = "sessions.max_requests_per_session"

// isBatch reports whether a POST body is a JSON array.
func isBatch(body []byte) bool {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '['
	}
	return false
}

// batch serves a POST whose body is a JSON-RPC batch. The 2025-03-26
// transport requires servers to accept them (2025-06-18 removed them), so
// only a session negotiated at 2025-03-26 may send one; initialize may
// not be in one. Each message is handled as if sent alone — parsed on its
// own, with the duplicate and case-variant member checks, notifications
// and responses delivered in order, requests run at once — and the
// requests' answers return together as one JSON array, in the order of
// the requests. A batch of notifications and responses only gets 202. A
// batch is bounded by sessions.max_requests_per_session.
func (t *Transport) batch(w http.ResponseWriter, r *http.Request, rte *core.Route, body []byte) {
	sess, ok := t.session(w, r, rte)
	if !ok {
		return
	}
	if v := sess.Version(); v != mcp.Version20250326 {
		edge.Error(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"JSON-RPC batches are accepted only on sessions of protocol revision %s, which defined them; this session's is %s, which has none: send one message per request", mcp.Version20250326, v))
		return
	}
	elems, err := rawjson.Elements(body)
	if err != nil {
		edge.Error(w, http.StatusBadRequest, jsonrpc.CodeParseError, "the batch is not a valid JSON array: "+err.Error())
		return
	}
	if len(elems) == 0 {
		edge.Error(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "an empty batch; send at least one message")
		return
	}
	if limit := rte.Gen.Limits.MaxRequestsPerSession; len(elems) > limit {
		t.core.Metrics().LimitRefused(batchBound)
		edge.Error(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"a batch of %d messages is over %s (%d); send fewer messages per batch, or raise %s", len(elems), batchBound, limit, batchBound))
		return
	}
	sess.Touch()
	answers := make([]*jsonrpc.Message, len(elems)) // nil: no answer due
	ids := make(map[string]bool, len(elems))
	var wg sync.WaitGroup
	for i, el := range elems {
		msg, perr := edge.ParseMessage(el)
		switch {
		case perr != nil:
			answers[i] = perr
		case msg.Kind() == jsonrpc.KindRequest && msg.Method == mcp.MethodInitialize:
			answers[i] = jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "initialize must not be part of a batch; send it alone"))
		case msg.Kind() == jsonrpc.KindRequest && ids[string(msg.ID)]:
			// Two answers with one id could not be told apart.
			answers[i] = jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "id %s repeats an earlier request of this batch; give each request its own id", msg.ID))
		case msg.Kind() == jsonrpc.KindRequest:
			ids[string(msg.ID)] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = t.batchRequest(r, sess, msg)
			}()
		case msg.Kind() == jsonrpc.KindNotification:
			t.core.Notification(sess.Session, msg)
		case msg.Kind() == jsonrpc.KindResponse:
			sess.Answer(msg)
		}
	}
	wg.Wait()
	out := make([][]byte, 0, len(answers))
	for _, a := range answers {
		if a == nil {
			continue
		}
		if b, err := jsonrpc.Encode(a); err == nil {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", mcp.ContentTypeJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rawjson.AppendArray(nil, out))
}

// batchRequest answers one request of a batch as the JSON path of request
// answers a request sent alone: tracked for notifications/cancelled, and
// ended by DELETE or the session's end.
func (t *Transport) batchRequest(r *http.Request, sess *sessions.Session, msg *jsonrpc.Message) *jsonrpc.Message {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(sess.Context(), cancel)
	defer stop()
	sess.Track(msg.ID, cancel)
	defer sess.Untrack(msg.ID)
	return t.core.Handle(ctx, sess.Session, msg, nil, nil)
}
