package edge

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// Accepts reports whether the request's Accept header takes mediaType.
func Accepts(r *http.Request, mediaType string) bool {
	rest := r.Header.Get("Accept")
	for rest != "" { // a walk rather than strings.Split: nothing allocated per request
		var part string
		part, rest, _ = strings.Cut(rest, ",")
		mt, _, _ := strings.Cut(part, ";")
		mt = strings.TrimSpace(mt)
		if strings.EqualFold(mt, mediaType) || mt == "*/*" {
			return true
		}
	}
	return false
}

// WriteJSON answers with one JSON-RPC message. A large one goes out in
// pieces (jsonrpc.Buffers), its result from the upstream's own buffer,
// with its length known up front.
func WriteJSON(w http.ResponseWriter, status int, m *jsonrpc.Message) {
	w.Header().Set("Content-Type", mcp.ContentTypeJSON)
	if len(m.Params)+len(m.Result) < piecesMin {
		b, _ := jsonrpc.Encode(m) // Encode cannot fail
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return
	}
	bufs := jsonrpc.Buffers(m)
	n := 0
	for _, p := range bufs {
		n += len(p)
	}
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(status)
	for _, p := range bufs {
		if _, err := w.Write(p); err != nil {
			return // the client is gone
		}
	}
}

// piecesMin is the size of params or result from which WriteJSON writes
// pieces rather than one copy of the message.
const piecesMin = 64 << 10

// Error answers an HTTP-level refusal with a JSON-RPC error body, which
// MCP clients know how to show.
func Error(w http.ResponseWriter, status, code int, msg string) {
	WriteJSON(w, status, jsonrpc.NewError(nil, &jsonrpc.Error{Code: code, Message: msg}))
}

// ReadMessage reads and parses one JSON-RPC message from a POST body with
// the Streamable POST's rules (Content-Type, max_body_bytes, parse errors),
// answering the HTTP request itself when it cannot.
func ReadMessage(w http.ResponseWriter, r *http.Request, maxBody int64) (*jsonrpc.Message, bool) {
	body, ok := ReadBody(w, r, maxBody)
	if !ok {
		return nil, false
	}
	msg, perr := ParseMessage(body)
	if perr != nil {
		WriteJSON(w, http.StatusBadRequest, perr)
		return nil, false
	}
	return msg, true
}

// ReadBody is ReadMessage's reading of the body, for a caller that parses
// it itself (a 2025-03-26 session's batch); it answers the request itself
// when it returns false.
func ReadBody(w http.ResponseWriter, r *http.Request, maxBody int64) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := strings.Cut(ct, ";")
		if !strings.EqualFold(strings.TrimSpace(mt), mcp.ContentTypeJSON) {
			Error(w, http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, "Content-Type must be application/json")
			return nil, false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			Error(w, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, "request body exceeds max_body_bytes")
			return nil, false
		}
		if IsBodyTimeout(err) { // BodyDeadline's
			w.Header().Set("Connection", "close")
			Error(w, http.StatusRequestTimeout, jsonrpc.CodeInvalidRequest, "the request body did not arrive within read_body_timeout; send it at once")
			return nil, false
		}
		Error(w, http.StatusBadRequest, jsonrpc.CodeParseError, "could not read request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// ParseMessage parses one message; on failure it returns the error
// response to send (with the message's id when it could be read).
func ParseMessage(b []byte) (*jsonrpc.Message, *jsonrpc.Message) {
	msg, err := mcp.Parse(b) // one reading: a member twice, or a case variant of one mcpgw reads, is refused (mcp/members.go)
	if err == nil {
		return msg, nil
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		je = jsonrpc.Errorf(jsonrpc.CodeParseError, "%v", err)
	}
	var id jsonrpc.ID
	if msg != nil && msg.ID.Valid() {
		id = msg.ID
	}
	return nil, jsonrpc.NewError(id, je)
}

// RefuseWhileDraining answers 503 once draining is closed (the gateway is
// shutting down and no new session may start); it reports whether it
// answered.
func RefuseWhileDraining(w http.ResponseWriter, draining <-chan struct{}) bool {
	select {
	case <-draining:
		w.Header().Set("Retry-After", "1")
		Error(w, http.StatusServiceUnavailable, jsonrpc.CodeInternalError, "mcpgw is shutting down; retry against another replica")
		return true
	default:
		return false
	}
}
