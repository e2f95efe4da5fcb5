package jsonrpc

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// A message that two decoders could read two ways is refused as a whole,
// with the member, where it is and what to do, and the id when it is
// unambiguous.
func TestParseOneReading(t *testing.T) {
	params := rawjson.NewMembers(map[string]*rawjson.Members{
		"name":  nil,
		"_meta": rawjson.NewMembers(map[string]*rawjson.Members{"progressToken": nil}),
	})
	tests := []struct {
		name   string
		in     string
		params bool   // parse with the params members
		msg    string // the error message; "" when accepted
		id     string // the id kept with the error
	}{
		{name: "duplicate in params", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"add"}}`,
			msg: `invalid request: duplicate member "name" in params; send each member once`, id: "1"},
		{name: "duplicate spelled with an escape", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","n\u0061me":"add"}}`,
			msg: `invalid request: duplicate member "name" in params; send each member once`, id: "1"},
		{name: "duplicate deep in arguments", in: `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"arguments":{"a":[{"repo":1,"repo":2}]}}}`,
			msg: `invalid request: duplicate member "repo" in params.arguments.a[0]; send each member once`, id: `"x"`},
		{name: "duplicate params", in: `{"jsonrpc":"2.0","id":2,"method":"m","params":{},"params":{"a":1}}`,
			msg: `invalid request: duplicate member "params" in the message; send each member once`, id: "2"},
		{name: "duplicate id", in: `{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`,
			msg: `invalid request: duplicate member "id" in the message; send each member once`},
		{name: "duplicate method", in: `{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"tools/call"}`,
			msg: `invalid request: duplicate member "method" in the message; send each member once`, id: "3"},
		{name: "duplicate in a result", in: `{"jsonrpc":"2.0","id":4,"result":{"isError":false,"isError":true}}`,
			msg: `invalid request: duplicate member "isError" in result; send each member once`, id: "4"},
		{name: "id after the duplicate is kept", in: `{"jsonrpc":"2.0","params":{"a":1,"a":1},"method":"m","id":5}`,
			msg: `invalid request: duplicate member "a" in params; send each member once`, id: "5"},
		{name: "envelope case variant", in: `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`,
			msg: `invalid request: member "Method" in the message is a case variant of "method", which decoders that ignore case read as "method"; spell it "method" exactly`, id: "1"},
		{name: "case variant of id", in: `{"jsonrpc":"2.0","ID":1,"method":"m"}`,
			msg: `invalid request: member "ID" in the message is a case variant of "id", which decoders that ignore case read as "id"; spell it "id" exactly`},
		{name: "error object case variant", in: `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","Code":2}}`,
			msg: `invalid request: member "Code" in error is a case variant of "code", which decoders that ignore case read as "code"; spell it "code" exactly`, id: "1"},
		{name: "params members not interpreted by default", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"a","NAME":"b"}}`},
		{name: "params case variant", params: true, in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ci__safe_tool","NAME":"delete_everything"}}`,
			msg: `invalid request: member "NAME" in params is a case variant of "name", which decoders that ignore case read as "name"; spell it "name" exactly`, id: "1"},
		{name: "Kelvin sign in _meta", params: true, in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressTo\u212aen":1}}}`,
			msg: `invalid request: member "progressTo\u212aen" in params._meta is a case variant of "progressToken", which decoders that ignore case read as "progressToken"; spell it "progressToken" exactly`, id: "1"},
		{name: "too deep", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}}`,
			msg: `invalid request: JSON nested deeper than 512 levels (in params.a[0][0][0][0][0][0]…); send a flatter message`, id: "1"},
		{name: "at the depth limit", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":` + strings.Repeat("[", MaxDepth-2) + strings.Repeat("]", MaxDepth-2) + `}}`},
	}
	withParams := NewParser(params)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := plain
			if tt.params {
				p = withParams
			}
			m, err := p.Parse([]byte(tt.in))
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("Parse = %v, want a *jsonrpc.Error", err)
			}
			if je.Code != CodeInvalidRequest || je.Message != tt.msg {
				t.Errorf("error = %d %s\nwant   %d %s", je.Code, je.Message, CodeInvalidRequest, tt.msg)
			}
			var id string
			if m != nil {
				id = string(m.ID)
			}
			if id != tt.id {
				t.Errorf("id kept = %q, want %q", id, tt.id)
			}
		})
	}
}

// Refusing a duplicate must not turn text that is not JSON into -32600.
func TestParseDuplicateInInvalidJSON(t *testing.T) {
	_, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"id":2,"method":"m",}`))
	var je *Error
	if !errors.As(err, &je) || je.Code != CodeParseError {
		t.Fatalf("Parse = %v, want -32700", err)
	}
}

// The parsed message does not share the caller's buffer.
func TestParseCopiesTheText(t *testing.T) {
	buf := []byte(`{"jsonrpc":"2.0","id":"a","method":"m","params":{"x":1}}`)
	m, err := Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = ' '
	}
	if string(m.ID) != `"a"` || string(m.Params) != `{"x":1}` || m.Method != "m" {
		t.Fatalf("message changed with the buffer: %+v", m)
	}
}

// A refused message still says what it was, so that a request is never
// answered as if it were the response to one (its id is in the sender's
// own id space).
func TestParseRefusedKeepsItsKind(t *testing.T) {
	tests := []struct {
		in   string
		kind Kind
		id   string
	}{
		{`{"jsonrpc":"2.0","params":{"a":1,"a":2},"method":"sampling/createMessage","id":1}`, KindRequest, "1"},
		{`{"jsonrpc":"2.0","params":{"a":1,"a":2},"Method":"x","id":1}`, KindRequest, "1"},
		{`{"jsonrpc":"2.0","params":{"a":1,"a":2},"method":5,"id":1}`, KindRequest, "1"},
		{`{"jsonrpc":"2.0","params":{"a":1,"a":2},"method":"notifications/progress"}`, KindNotification, ""},
		{`{"jsonrpc":"2.0","result":{"a":1,"a":2},"id":7}`, KindResponse, "7"},
		{`{"jsonrpc":"2.0","result":{},"id":7,"Id":8}`, KindResponse, ""},
	}
	for _, tt := range tests {
		m, err := Parse([]byte(tt.in))
		if err == nil || m == nil {
			t.Fatalf("Parse(%s) = %v, %v; want a refusal with the message", tt.in, m, err)
		}
		if m.Kind() != tt.kind || string(m.ID) != tt.id {
			t.Errorf("Parse(%s): kind %v id %q, want %v %q", tt.in, m.Kind(), m.ID, tt.kind, tt.id)
		}
	}
}
