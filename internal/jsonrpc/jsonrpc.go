// Package jsonrpc is the JSON-RPC 2.0 wire layer: message framing, parsing and
// encoding. It knows nothing of MCP; params, results and ids stay raw JSON so
// that whatever passes through is forwarded byte for byte.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Kind says what a message is.
type Kind int

const (
	// KindRequest has a method and an id and expects a response.
	KindRequest Kind = iota + 1
	// KindNotification has a method and no id.
	KindNotification
	// KindResponse has an id and a result or an error.
	KindResponse
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// ID is a request id kept as its raw JSON text (a string or a number), so that
// it round-trips exactly: 1, 1.0 and "1" are three different ids.
type ID json.RawMessage

// IntID returns the id for n.
func IntID(n int64) ID { return ID(strconv.AppendInt(nil, n, 10)) }

// String returns the id's JSON text.
func (id ID) String() string { return string(id) }

// Valid reports whether id is a JSON string or number (null is not an id
// a server may answer to in MCP).
func (id ID) Valid() bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"':
		if plainString(id) {
			return true // the usual id, without encoding/json's allocations
		}
		var s string
		return json.Unmarshal(id, &s) == nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return isNumber(id)
	}
	return false
}

// plainString reports whether b is a JSON string of printable ASCII
// without escapes (a false answer says only that it is not that simple).
func plainString(b []byte) bool {
	if len(b) < 2 || b[len(b)-1] != '"' {
		return false
	}
	for _, c := range b[1 : len(b)-1] {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// isNumber reports whether b is exactly one JSON number, maybe followed
// by whitespace (as encoding/json allows).
func isNumber(b []byte) bool { return rawjson.IsNumber(bytes.TrimRight(b, " \t\n\r")) }

// MarshalJSON writes the raw id.
func (id ID) MarshalJSON() ([]byte, error) {
	if len(id) == 0 {
		return []byte("null"), nil
	}
	return id, nil
}

// UnmarshalJSON keeps the raw id.
func (id *ID) UnmarshalJSON(b []byte) error {
	*id = append((*id)[:0], b...)
	return nil
}

// Error is a JSON-RPC error object. Data stays raw.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Errorf builds an Error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Message is one JSON-RPC message. Exactly which fields are set depends on
// its Kind; Params and Result are never decoded here.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      ID              `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	// ResultEdits change Result where Encode and Buffers write it; Result
	// itself keeps the bytes as they came (ApplyEdits folds them in).
	ResultEdits []Edit `json:"-"`

	members *resultMembers // what Parse saw of Result's members
}

// resultMembers records the members of a parsed Result (ResultMembers):
// Check's record, in offsets of Result.
type resultMembers struct {
	first *byte // Result as it was recorded: its first byte and length
	n     int
	rec   rawjson.MemberRecord
}

// ResultMembers calls fn with each top-level member of Result in order,
// as Parse saw them, sparing the caller a scan of a large result: the
// member's name (as written, which is its value: names with escapes are
// not recorded; valid while Result is) and its value's span in Result. It
// reports false, without calling fn, when there is no such record (a
// message Parse did not read, a Result set since, or one with more members
// than are kept): the caller then reads Result itself.
func (m *Message) ResultMembers(fn func(name string, start, end int)) bool {
	v := m.members
	if v == nil || v.rec.Escaped || v.rec.Count > len(v.rec.Spans) ||
		len(m.Result) == 0 || len(m.Result) != v.n || unsafe.SliceData(m.Result) != v.first {
		return false
	}
	for _, sp := range v.rec.Spans[:v.rec.Count] {
		ks := int(sp.Name) + 1 // past the opening quote; no escapes, so the next quote ends it
		ke := ks + bytes.IndexByte(m.Result[ks:], '"')
		fn(unsafe.String(unsafe.SliceData(m.Result[ks:]), ke-ks), int(sp.Start), int(sp.End))
	}
	return true
}

// Kind classifies the message. Parse guarantees it is one of the three.
func (m *Message) Kind() Kind {
	switch {
	case m.Method != "" && m.ID != nil:
		return KindRequest
	case m.Method != "":
		return KindNotification
	default:
		return KindResponse
	}
}

// NewRequest builds a request.
func NewRequest(id ID, method string, params json.RawMessage) *Message {
	return &Message{JSONRPC: "2.0", ID: id, Method: method, Params: params}
}

// NewNotification builds a notification.
func NewNotification(method string, params json.RawMessage) *Message {
	return &Message{JSONRPC: "2.0", Method: method, Params: params}
}

// NewResult builds a successful response.
func NewResult(id ID, result json.RawMessage) *Message {
	if result == nil {
		result = json.RawMessage("{}")
	}
	return &Message{JSONRPC: "2.0", ID: id, Result: result}
}

// NewError builds an error response. A nil id is sent as null, as the spec
// requires when the request's id could not be read.
func NewError(id ID, err *Error) *Message {
	if id == nil {
		id = ID("null")
	}
	return &Message{JSONRPC: "2.0", ID: id, Error: err}
}

// Encode returns the message's JSON text without a trailing newline. It is
// assembled by hand rather than with json.Marshal, which would compact (and
// HTML-escape) raw params and results: what an upstream sent is forwarded
// byte for byte. ResultEdits are applied.
func Encode(m *Message) ([]byte, error) {
	e := encoder{b: make([]byte, 0, m.encodedSize())}
	e.message(m)
	return e.b, nil
}

// Buffers returns the message's JSON text (as Encode has it) in pieces: the
// envelope's own bytes, and between them params, result and error data as
// slices of their own memory, not copied. Writing a large answer this way
// (net.Buffers.WriteTo, or piece by piece) costs no copy of it.
func Buffers(m *Message) net.Buffers {
	out := make(net.Buffers, 0, 4+2*len(m.ResultEdits))
	e := encoder{b: make([]byte, 0, 96), out: &out}
	e.message(m)
	e.finish()
	return out
}

// An Edit replaces the bytes [Start, End) of a message's Result with With
// when the message is encoded: how a few members of a large result are
// changed without copying the rest, which goes out from the upstream's
// own buffer (DESIGN.md: one scan, then byte-span edits).
type Edit struct {
	Start, End int
	With       []byte
}

// ApplyEdits makes Result what Encode writes: its edits applied, in one
// copy, for a caller that reads the result rather than writing it out.
func (m *Message) ApplyEdits() {
	if len(m.ResultEdits) == 0 {
		return
	}
	var e encoder
	e.b = make([]byte, 0, m.resultSize())
	e.result(m)
	m.Result, m.ResultEdits = e.b, nil
}

// resultSize is the length of the result with its edits applied.
func (m *Message) resultSize() int {
	n, prev := len(m.Result), 0
	for _, ed := range m.ResultEdits {
		if m.fits(ed, prev) {
			n += len(ed.With) - (ed.End - ed.Start)
			prev = ed.End
		}
	}
	return n
}

// fits reports whether edit ed applies: it lies in the result, after the
// edit applied before it (which ended at prev).
func (m *Message) fits(ed Edit, prev int) bool {
	return ed.Start >= prev && ed.End >= ed.Start && ed.End <= len(m.Result)
}

// encodedSize is at least the length of Encode(m) when no string needs
// escaping: the envelope's literals take 16+6+10+1 bytes, an error's 24.
func (m *Message) encodedSize() int {
	n := 64 + len(m.ID) + len(m.Method) + len(m.Params) + m.resultSize()
	if m.Error != nil {
		n += 48 + len(m.Error.Message) + len(m.Error.Data)
	}
	return n
}

// encoder assembles a message's text: into b alone (Encode), or, when out
// is set, into pieces where every raw member of inlineMax bytes or more is
// its own piece, a slice of the member's memory (Buffers).
type encoder struct {
	b    []byte
	mark int // b[mark:] is not in out yet
	out  *net.Buffers
}

// inlineMax is the size from which Buffers hands a raw member out as a
// piece of its own rather than copying it: below it, a piece costs more
// than the copy.
const inlineMax = 512

func (e *encoder) raw(v []byte) {
	if e.out == nil || len(v) < inlineMax {
		e.b = append(e.b, v...)
		return
	}
	e.finish()
	*e.out = append(*e.out, v)
}

// finish puts what b holds beyond mark into out. Later appends to b write
// past it or into a new array, so the piece stays as it is.
func (e *encoder) finish() {
	if len(e.b) > e.mark {
		*e.out = append(*e.out, e.b[e.mark:len(e.b):len(e.b)])
		e.mark = len(e.b)
	}
}

func (e *encoder) message(m *Message) {
	e.b = append(e.b, `{"jsonrpc":"2.0"`...)
	if m.ID != nil {
		e.b = append(e.b, `,"id":`...)
		e.b = append(e.b, m.ID...)
	}
	if m.Method != "" {
		e.b = append(e.b, `,"method":`...)
		e.b = appendString(e.b, m.Method)
	}
	if len(m.Params) > 0 {
		e.b = append(e.b, `,"params":`...)
		e.raw(m.Params)
	}
	if len(m.Result) > 0 {
		e.b = append(e.b, `,"result":`...)
		e.result(m)
	}
	if m.Error != nil {
		e.b = append(e.b, `,"error":{"code":`...)
		e.b = strconv.AppendInt(e.b, int64(m.Error.Code), 10)
		e.b = append(e.b, `,"message":`...)
		e.b = appendString(e.b, m.Error.Message)
		if len(m.Error.Data) > 0 {
			e.b = append(e.b, `,"data":`...)
			e.raw(m.Error.Data)
		}
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, '}')
}

// result writes Result with ResultEdits applied (they are in order and do
// not overlap; one that does not fit the result is not applied).
func (e *encoder) result(m *Message) {
	prev := 0
	for _, ed := range m.ResultEdits {
		if !m.fits(ed, prev) {
			continue
		}
		e.raw(m.Result[prev:ed.Start])
		e.raw(ed.With)
		prev = ed.End
	}
	e.raw(m.Result[prev:])
}

// appendString appends s as a JSON string without HTML escaping, so error
// messages stay readable ("<upstream>", not "\u003cupstream\u003e").
func appendString(b []byte, s string) []byte {
	if plainASCII(s) { // method names and most messages: nothing to escape
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// plainASCII reports whether s is printable ASCII without a quote or a
// backslash: JSON that quotes it as it is.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ErrBatch is returned by Parse for a JSON array: batches were removed from
// MCP in 2025-06-18 and mcpgw does not accept them.
var ErrBatch = errors.New("JSON-RPC batches are not supported; send one message per request")

// MaxDepth bounds the nesting of arrays and objects in a message, the
// envelope included (encoding/json alone would follow 10,000 levels).
const MaxDepth = rawjson.DefaultMaxDepth

// A Parser reads messages for a reader that interprets some members of
// params (and knows what they are: this package does not). Parse refuses,
// in the one pass that also validates the JSON, any message that names a
// member twice in any object, at any depth — decoders that keep the first
// and the last would read two different messages — and a case variant of
// an envelope member, of an error object's members, or of a member the
// reader interprets in params, which a case-insensitive decoder (Go's
// encoding/json) would take for the member itself.
type Parser struct {
	members *rawjson.Members
	methods map[string]string // known method names by their JSON text, read without an allocation
}

// envelope is what this layer interprets itself, with params' members.
func envelope(params *rawjson.Members) *rawjson.Members {
	return rawjson.NewMembers(map[string]*rawjson.Members{
		"jsonrpc": nil,
		"id":      nil,
		"method":  nil,
		"params":  params,
		"result":  nil,
		"error":   rawjson.NewMembers(map[string]*rawjson.Members{"code": nil, "message": nil, "data": nil}),
	})
}

// NewParser returns a Parser for a reader that interprets params (nil:
// nothing inside params). Messages naming one of methods get that string
// itself as their Method, rather than a new copy.
func NewParser(params *rawjson.Members, methods ...string) *Parser {
	p := &Parser{members: envelope(params), methods: make(map[string]string, len(methods))}
	for _, m := range methods {
		q, _ := json.Marshal(m)
		p.methods[string(q)] = m
	}
	return p
}

// plain interprets nothing inside params.
var plain = NewParser(nil)

// Parse decodes one JSON-RPC message and checks its shape, as a Parser
// that interprets nothing inside params does.
func Parse(data []byte) (*Message, error) { return plain.Parse(data) }

// ParseOwned is Parse for a buffer the caller hands over and never
// changes again (what a transport read for this one message): the message
// keeps spans of data itself rather than of a copy, so a large result is
// not copied to be parsed.
func ParseOwned(data []byte) (*Message, error) { return plain.parse(data, false) }

// Parse decodes one JSON-RPC message and checks its shape. Its errors are
// *Error values with the code a peer should be answered with; with an
// error, the message returned (when not nil) is only good for its ID,
// which is set when it could be read unambiguously.
func (p *Parser) Parse(data []byte) (*Message, error) { return p.parse(data, true) }

func (p *Parser) parse(data []byte, clone bool) (*Message, error) {
	// Only JSON's own whitespace: bytes.TrimSpace would also accept \v, \f
	// and Unicode spaces around a body that is not valid JSON.
	data = bytes.Trim(data, " \t\r\n")
	if len(data) == 0 {
		return nil, Errorf(CodeParseError, "parse error: empty message")
	}
	if data[0] == '[' {
		if !json.Valid(data) {
			return nil, Errorf(CodeParseError, "parse error: body is not valid JSON")
		}
		return nil, &Error{Code: CodeInvalidRequest, Message: ErrBatch.Error()}
	}
	if data[0] != '{' {
		if !json.Valid(data) {
			return nil, Errorf(CodeParseError, "parse error: body is not valid JSON")
		}
		return nil, Errorf(CodeInvalidRequest, "invalid request: a JSON-RPC message must be a JSON object")
	}
	// The message keeps spans of one copy of the text (the caller may
	// reuse its buffer); ids are copied apart, as they outlive it.
	if clone {
		data = bytes.Clone(data)
	}
	// What the Root callback fills, in one allocation: the callback
	// escapes, and with it everything it captures.
	st := new(struct {
		m               Message
		fieldErr        *Error
		version, errObj []byte
		members         resultMembers // data offsets until Check is done
	})
	m, fieldErr, version, errObj, rm := &st.m, &st.fieldErr, &st.version, &st.errObj, &st.members
	rm.rec.Of = "result"
	err := rawjson.Check(data, rawjson.CheckOptions{MaxDepth: MaxDepth, Members: p.members, Record: &rm.rec, Root: func(name, value []byte) {
		switch string(name) {
		case "jsonrpc":
			*version = value
		case "id":
			m.ID = ID(bytes.Clone(value))
		case "method":
			if string(value) == "null" {
				return // as encoding/json reads it: absent
			}
			if known, ok := p.methods[string(value)]; ok {
				m.Method = known
				return
			}
			s, ok := decodeString(value)
			if !ok && *fieldErr == nil {
				*fieldErr = Errorf(CodeInvalidRequest, `invalid request: "method" must be a string`)
			}
			m.Method = s
		case "params":
			m.Params = json.RawMessage(value)
		case "result":
			m.Result = json.RawMessage(value)
		case "error":
			*errObj = value
		}
	}})
	if err != nil {
		return checkFailed(data, err)
	}
	if len(m.Result) > 0 && m.Result[0] == '{' {
		// Offsets in data become offsets in Result (a slice of data).
		off := int32(cap(data) - cap(m.Result))
		for i := range rm.rec.Spans[:min(rm.rec.Count, len(rm.rec.Spans))] {
			sp := &rm.rec.Spans[i]
			sp.Name, sp.Start, sp.End = sp.Name-off, sp.Start-off, sp.End-off
		}
		rm.first, rm.n = unsafe.SliceData(m.Result), len(m.Result)
		m.members = rm
	}
	if *fieldErr != nil {
		return m, *fieldErr
	}
	if *errObj != nil && string(*errObj) != "null" {
		var e Error
		if err := json.Unmarshal(*errObj, &e); err != nil {
			return m, Errorf(CodeInvalidRequest, "invalid request: error: %v", err)
		}
		m.Error = &e
	}
	switch {
	case string(*version) == `"2.0"`:
		m.JSONRPC = "2.0" // what every message says, without a copy
	case *version != nil && string(*version) != "null":
		m.JSONRPC, _ = decodeString(*version)
	}
	if m.JSONRPC != "2.0" {
		return m, Errorf(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	if m.ID != nil && string(m.ID) != "null" && !m.ID.Valid() {
		return m, Errorf(CodeInvalidRequest, "invalid request: id must be a string or a number")
	}
	if string(m.ID) == "null" {
		// A null id is only meaningful on an error response to an unreadable request.
		if m.Method != "" || m.Error == nil {
			return m, Errorf(CodeInvalidRequest, "invalid request: id must not be null")
		}
	}
	if m.Method != "" {
		if m.Result != nil || m.Error != nil {
			return m, Errorf(CodeInvalidRequest, "invalid request: a request must not carry result or error")
		}
		if len(m.Params) > 0 && m.Params[0] != '{' && m.Params[0] != '[' {
			return m, Errorf(CodeInvalidRequest, "invalid request: params must be an object or an array")
		}
		return m, nil
	}
	if m.ID == nil {
		return m, Errorf(CodeInvalidRequest, "invalid request: message has neither method nor id")
	}
	if (m.Result == nil) == (m.Error == nil) {
		return m, Errorf(CodeInvalidRequest, "invalid response: exactly one of result and error must be set")
	}
	return m, nil
}

// checkFailed turns a refusal of rawjson.Check into the answer: -32700
// for text that is not JSON, -32600 naming the member and the fix for
// JSON that cannot be read one way only. The message returned carries
// what answering needs: the id when the message names exactly one,
// spelled exactly (so that the sender can match the answer to its
// request), and a Method when it names one (so that a request is not
// taken for a response).
func checkFailed(data []byte, err error) (*Message, error) {
	var ce *rawjson.CheckError
	if !errors.As(err, &ce) {
		return nil, Errorf(CodeInternalError, "parse: %v", err)
	}
	if ce.Reason == rawjson.Syntax || !json.Valid(data) {
		// Check stops at the first refusal; only a syntax error anywhere
		// makes the text not JSON.
		msg := ce.Detail + " at offset " + strconv.Itoa(ce.Offset)
		if ce.Reason != rawjson.Syntax {
			msg = "body is not valid JSON"
		}
		return nil, Errorf(CodeParseError, "parse error: %s", msg)
	}
	m := answerable(data)
	in := ce.Where()
	if in == "" {
		in = "the message"
	}
	switch ce.Reason {
	case rawjson.Duplicate:
		return m, Errorf(CodeInvalidRequest, "invalid request: duplicate member %s in %s; send each member once", rawjson.QuoteName(ce.Name), in)
	case rawjson.CaseVariant:
		return m, Errorf(CodeInvalidRequest, "invalid request: member %s in %s is a case variant of %s, which decoders that ignore case read as %s; spell it %s exactly",
			rawjson.QuoteName(ce.Name), in, rawjson.QuoteName(ce.Want), rawjson.QuoteName(ce.Want), rawjson.QuoteName(ce.Want))
	default:
		return m, Errorf(CodeInvalidRequest, "invalid request: JSON nested deeper than %d levels (in %s); send a flatter message", ce.MaxDepth, in)
	}
}

// answerable reads the id and method of valid JSON text data that Check
// refused: the id when the top level names exactly one member "id" and no
// case variant of it; the method, when any member spells "method" in any
// case, as that member's string (or "?" when it is not one).
func answerable(data []byte) *Message {
	var m Message
	var id []byte
	ids := 0
	_ = rawjson.EachField(data, func(f rawjson.Field) bool {
		switch {
		case strings.EqualFold(f.Key, "id"):
			ids++
			if f.Key == "id" {
				id = f.Value
			}
		case strings.EqualFold(f.Key, "method") && m.Method == "":
			if s, ok := decodeString(f.Value); ok && s != "" {
				m.Method = s
			} else {
				m.Method = "?"
			}
		}
		return true
	})
	if ids == 1 && id != nil {
		m.ID = ID(bytes.Clone(id))
	}
	return &m
}

// decodeString decodes a JSON string value as encoding/json does.
func decodeString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	return string(rawjson.AppendUnquoted(nil, inner)), true
}
