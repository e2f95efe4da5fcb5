package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   Kind
		id     string // raw id text; "" for none
		method string
		params string
		result string
		errMsg string // error response's message
	}{
		{
			name: "request with object params",
			in:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"x"}}`,
			kind: KindRequest, id: `1`, method: "tools/list", params: `{"cursor":"x"}`,
		},
		{
			name: "request with array params",
			in:   `{"jsonrpc":"2.0","id":"a","method":"m","params":[1,2]}`,
			kind: KindRequest, id: `"a"`, method: "m", params: `[1,2]`,
		},
		{
			name: "request without params",
			in:   `{"jsonrpc":"2.0","id":0,"method":"ping"}`,
			kind: KindRequest, id: `0`, method: "ping",
		},
		{
			name: "request with the members in another order",
			in:   `{"params":{},"method":"m","id":-5,"jsonrpc":"2.0"}`,
			kind: KindRequest, id: `-5`, method: "m", params: `{}`,
		},
		{
			name: "notification",
			in:   `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			kind: KindNotification, method: "notifications/initialized",
		},
		{
			name: "notification with params",
			in:   `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
			kind: KindNotification, method: "notifications/progress", params: `{"progress":1}`,
		},
		{
			name: "result response",
			in:   `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`,
			kind: KindResponse, id: `7`, result: `{"tools":[]}`,
		},
		{
			name: "null result is a result",
			in:   `{"jsonrpc":"2.0","id":7,"result":null}`,
			kind: KindResponse, id: `7`, result: `null`,
		},
		{
			name: "error response",
			in:   `{"jsonrpc":"2.0","id":"r1","error":{"code":-32601,"message":"no such method"}}`,
			kind: KindResponse, id: `"r1"`, errMsg: "no such method",
		},
		{
			name: "error response with a null id",
			in:   `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
			kind: KindResponse, id: `null`, errMsg: "parse error",
		},
		{
			name: "JSON whitespace around and inside",
			in:   " \t\r\n{ \"jsonrpc\" : \"2.0\" ,\n\"id\" : 1 , \"method\":\"m\", \"params\" : { \"a\" : 1 } }\r\n\t ",
			kind: KindRequest, id: `1`, method: "m", params: `{ "a" : 1 }`,
		},
		{
			name: "unknown members are ignored",
			in:   `{"jsonrpc":"2.0","method":"m","extra":{"x":[1]}}`,
			kind: KindNotification, method: "m",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := m.Kind(); got != tt.kind {
				t.Errorf("Kind = %v, want %v", got, tt.kind)
			}
			if string(m.ID) != tt.id {
				t.Errorf("ID = %q, want %q", m.ID, tt.id)
			}
			if m.Method != tt.method {
				t.Errorf("Method = %q, want %q", m.Method, tt.method)
			}
			if string(m.Params) != tt.params {
				t.Errorf("Params = %q, want %q", m.Params, tt.params)
			}
			if string(m.Result) != tt.result {
				t.Errorf("Result = %q, want %q", m.Result, tt.result)
			}
			switch {
			case tt.errMsg == "" && m.Error != nil:
				t.Errorf("Error = %v, want none", m.Error)
			case tt.errMsg != "" && (m.Error == nil || m.Error.Message != tt.errMsg):
				t.Errorf("Error = %v, want message %q", m.Error, tt.errMsg)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		code int
		msg  string // substring of the error message; "" to skip
	}{
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, CodeInvalidRequest, ErrBatch.Error()},
		{"batch with whitespace", " \n[ {\"jsonrpc\":\"2.0\",\"method\":\"m\"} ] ", CodeInvalidRequest, ErrBatch.Error()},
		{"empty batch", `[]`, CodeInvalidRequest, ErrBatch.Error()},
		{"invalid batch", `[{"jsonrpc":"2.0"`, CodeParseError, ""},

		{"empty", ``, CodeParseError, "empty"},
		{"whitespace only", " \t\r\n", CodeParseError, "empty"},
		{"truncated object", `{"jsonrpc":"2.0","method":"m"`, CodeParseError, ""},
		{"trailing comma", `{"jsonrpc":"2.0","method":"m",}`, CodeParseError, ""},
		{"trailing garbage", `{"jsonrpc":"2.0","method":"m"} x`, CodeParseError, ""},
		{"two objects", `{"jsonrpc":"2.0","method":"m"}{"jsonrpc":"2.0","method":"m"}`, CodeParseError, ""},
		{"single quotes", `{'jsonrpc':'2.0','method':'m'}`, CodeParseError, ""},
		{"bare word", `hello`, CodeParseError, ""},
		{"form feed is not JSON whitespace", "\f{\"jsonrpc\":\"2.0\",\"method\":\"m\"}", CodeParseError, ""},
		{"vertical tab is not JSON whitespace", "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\v", CodeParseError, ""},
		{"no-break space is not JSON whitespace", "\u00a0{\"jsonrpc\":\"2.0\",\"method\":\"m\"}", CodeParseError, ""},
		{"NEL is not JSON whitespace", "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\u0085", CodeParseError, ""},

		{"string", `"hello"`, CodeInvalidRequest, "JSON object"},
		{"number", `42`, CodeInvalidRequest, "JSON object"},
		{"null", `null`, CodeInvalidRequest, "JSON object"},
		{"true", `true`, CodeInvalidRequest, "JSON object"},

		{"missing jsonrpc", `{"id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc"`},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc"`},
		{"jsonrpc empty", `{"jsonrpc":"","id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc"`},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"m"}`, CodeInvalidRequest, ""},
		{"jsonrpc null", `{"jsonrpc":null,"id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc"`},

		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"m"}`, CodeInvalidRequest, "id must be"},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"m"}`, CodeInvalidRequest, "id must be"},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"m"}`, CodeInvalidRequest, "id must be"},
		{"bool id on response", `{"jsonrpc":"2.0","id":false,"result":{}}`, CodeInvalidRequest, "id must be"},
		{"null id on request", `{"jsonrpc":"2.0","id":null,"method":"m"}`, CodeInvalidRequest, "null"},
		{"null id on result", `{"jsonrpc":"2.0","id":null,"result":{}}`, CodeInvalidRequest, "null"},

		{"both result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, CodeInvalidRequest, "exactly one"},
		{"neither result nor error", `{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest, "exactly one"},
		{"null error and no result", `{"jsonrpc":"2.0","id":1,"error":null}`, CodeInvalidRequest, "exactly one"},
		{"neither method nor id", `{"jsonrpc":"2.0","result":{}}`, CodeInvalidRequest, "neither"},
		{"empty object", `{}`, CodeInvalidRequest, ""},
		{"request with result", `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, CodeInvalidRequest, "must not carry"},
		{"notification with error", `{"jsonrpc":"2.0","method":"m","error":{"code":1,"message":"x"}}`, CodeInvalidRequest, "must not carry"},

		{"string params", `{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, CodeInvalidRequest, "params"},
		{"number params", `{"jsonrpc":"2.0","method":"m","params":1}`, CodeInvalidRequest, "params"},
		{"null params", `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, CodeInvalidRequest, "params"},

		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, CodeInvalidRequest, ""},
		{"error not an object", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, CodeInvalidRequest, ""},
		{"fractional error code", `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`, CodeInvalidRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("error %T (%v) is not a *jsonrpc.Error", err, err)
			}
			if je.Code != tt.code {
				t.Errorf("code = %d, want %d (%v)", je.Code, tt.code, je)
			}
			if tt.msg != "" && !strings.Contains(je.Message, tt.msg) {
				t.Errorf("message = %q, want it to contain %q", je.Message, tt.msg)
			}
		})
	}
}

func TestParseBatchMessageIsErrBatch(t *testing.T) {
	_, err := Parse([]byte(`[{"jsonrpc":"2.0","method":"m"}]`))
	var je *Error
	if !errors.As(err, &je) || je.Message != ErrBatch.Error() {
		t.Fatalf("err = %v, want message %q", err, ErrBatch.Error())
	}
}

// The router answers an invalid request with its id when it could be read.
func TestParseKeepsIDOnInvalidRequest(t *testing.T) {
	m, err := Parse([]byte(`{"jsonrpc":"1.0","id":"abc","method":"m"}`))
	if err == nil {
		t.Fatal("want an error")
	}
	if m == nil || string(m.ID) != `"abc"` || !m.ID.Valid() {
		t.Fatalf("message = %+v, want the id kept", m)
	}
}

func TestIDRoundTrip(t *testing.T) {
	ids := []string{
		`1`, `1.0`, `"1"`, `-5`, `"x\u00e9"`, `"xé"`, `0`, `-0`, `1e3`, `1E+3`, `2.50`,
		`12345678901234567890123456789`, `""`, `"a\"b\\c"`, `"\ud83d\ude00"`, `"<&>"`,
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			for _, tmpl := range []string{
				`{"jsonrpc":"2.0","id":%s,"method":"m"}`,
				`{"jsonrpc":"2.0","id":%s,"result":{}}`,
				`{"jsonrpc":"2.0","id":%s,"error":{"code":1,"message":"x"}}`,
			} {
				in := strings.Replace(tmpl, "%s", id, 1)
				m, err := Parse([]byte(in))
				if err != nil {
					t.Fatalf("Parse(%s): %v", in, err)
				}
				if string(m.ID) != id {
					t.Fatalf("ID = %s, want %s", m.ID, id)
				}
				b, err := Encode(m)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(b, []byte(`"id":`+id)) {
					t.Errorf("Encode = %s, want the id %s byte for byte", b, id)
				}
				m2, err := Parse(b)
				if err != nil {
					t.Fatalf("re-Parse(%s): %v", b, err)
				}
				if string(m2.ID) != id {
					t.Errorf("re-parsed ID = %s, want %s", m2.ID, id)
				}
			}
		})
	}
}

func TestIDsAreDistinct(t *testing.T) {
	// Pending calls are keyed by the id's text: 1, 1.0 and "1" must not collide.
	seen := map[string]bool{}
	for _, id := range []string{`1`, `1.0`, `"1"`} {
		m, err := Parse([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		if seen[string(m.ID)] {
			t.Fatalf("id %s collides", id)
		}
		seen[string(m.ID)] = true
	}
}

func TestIDValid(t *testing.T) {
	tests := []struct {
		id   ID
		want bool
	}{
		{nil, false},
		{ID(""), false},
		{ID(`1`), true},
		{ID(`-1.5e3`), true},
		{ID(`"s"`), true},
		{ID(`""`), true},
		{ID(`null`), false},
		{ID(`true`), false},
		{ID(`{}`), false},
		{ID(`[]`), false},
		{ID(`"unterminated`), false},
		{ID(`01`), false},
		{ID(`-`), false},
		{ID(`1 2`), false},
		{IntID(42), true},
		{IntID(-9223372036854775808), true},
	}
	for _, tt := range tests {
		if got := tt.id.Valid(); got != tt.want {
			t.Errorf("ID(%q).Valid() = %v, want %v", tt.id, got, tt.want)
		}
	}
	if s := IntID(-12).String(); s != "-12" {
		t.Errorf("IntID(-12) = %q", s)
	}
}

func TestIDJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		A ID `json:"a"`
		B ID `json:"b"`
	}{A: ID(`1.0`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"a":1.0,"b":null}` {
		t.Errorf("Marshal = %s", b)
	}
	var v struct{ A ID }
	if err := json.Unmarshal([]byte(`{"A":"x\u00e9"}`), &v); err != nil {
		t.Fatal(err)
	}
	if string(v.A) != `"x\u00e9"` {
		t.Errorf("Unmarshal kept %s", v.A)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		KindRequest: "request", KindNotification: "notification", KindResponse: "response", 0: "invalid", 99: "invalid",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// Raw values with everything json.Marshal would change: whitespace, key
// order, escapes it would rewrite and characters it would HTML-escape.
const tricky = "{ \"z\" : 1 ,\n\t\"a\":\"\\u003c<>&\\u00e9\u00e9\\/\" , \"n\": [ 1.0, 1e2, -0 ], \"s\":\"\u2028\" }"

func TestEncodeKeepsRawBytes(t *testing.T) {
	tests := []struct {
		name  string
		msg   *Message
		parts []string // substrings the encoding must contain
	}{
		{"request params", NewRequest(IntID(1), "tools/call", json.RawMessage(tricky)),
			[]string{`"params":` + tricky, `"id":1`, `"method":"tools/call"`}},
		{"notification params", NewNotification("n", json.RawMessage(`[ "<b>" ]`)),
			[]string{`"params":[ "<b>" ]`}},
		{"result", NewResult(ID(`"r"`), json.RawMessage(tricky)),
			[]string{`"result":` + tricky, `"id":"r"`}},
		{"default result", NewResult(IntID(2), nil),
			[]string{`"result":{}`}},
		{"error data", NewError(IntID(3), &Error{Code: -32000, Message: "m", Data: json.RawMessage(tricky)}),
			[]string{`"data":` + tricky, `"code":-32000`}},
		{"error message not HTML-escaped", NewError(IntID(4), Errorf(CodeInternalError, "<upstream> & %q", "x")),
			[]string{`"message":"<upstream> & \"x\""`}},
		{"method not HTML-escaped", NewRequest(IntID(5), "a<b>&c", nil),
			[]string{`"method":"a<b>&c"`}},
		{"nil id on error is null", NewError(nil, Errorf(CodeParseError, "bad")),
			[]string{`"id":null`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(b) {
				t.Fatalf("Encode = %s, not valid JSON", b)
			}
			if bytes.HasSuffix(b, []byte("\n")) {
				t.Errorf("Encode = %q, want no trailing newline", b)
			}
			if !bytes.HasPrefix(b, []byte(`{"jsonrpc":"2.0"`)) {
				t.Errorf("Encode = %s, want it to start with the version", b)
			}
			for _, p := range tt.parts {
				if !bytes.Contains(b, []byte(p)) {
					t.Errorf("Encode = %s\nwant it to contain %s", b, p)
				}
			}
			m, err := Parse(b)
			if err != nil {
				t.Fatalf("re-Parse(%s): %v", b, err)
			}
			assertSameMessage(t, tt.msg, m)
		})
	}
}

// Encode must not touch the bytes it forwards through Parse either.
func TestParseEncodeForwardsBytes(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":9,"method":"m","params":` + tricky + `}`
	m, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Params) != tricky {
		t.Fatalf("Params = %s, want %s", m.Params, tricky)
	}
	b, _ := Encode(m)
	if string(b) != in {
		t.Errorf("Encode = %s\nwant       %s", b, in)
	}
}

func TestErrorString(t *testing.T) {
	e := Errorf(CodeInvalidParams, "bad %s", "thing")
	if e.Code != CodeInvalidParams || e.Message != "bad thing" {
		t.Fatalf("Errorf = %+v", e)
	}
	if got := e.Error(); got != "jsonrpc error -32602: bad thing" {
		t.Errorf("Error() = %q", got)
	}
}

func assertSameMessage(t *testing.T, want, got *Message) {
	t.Helper()
	if want.Kind() != got.Kind() {
		t.Errorf("Kind = %v, want %v", got.Kind(), want.Kind())
	}
	if !bytes.Equal(want.ID, got.ID) {
		t.Errorf("ID = %s, want %s", got.ID, want.ID)
	}
	if want.Method != got.Method {
		t.Errorf("Method = %q, want %q", got.Method, want.Method)
	}
	if !bytes.Equal(want.Params, got.Params) {
		t.Errorf("Params = %s, want %s", got.Params, want.Params)
	}
	if !bytes.Equal(want.Result, got.Result) {
		t.Errorf("Result = %s, want %s", got.Result, want.Result)
	}
	if (want.Error == nil) != (got.Error == nil) {
		t.Fatalf("Error = %v, want %v", got.Error, want.Error)
	}
	if want.Error != nil {
		if want.Error.Code != got.Error.Code || want.Error.Message != got.Error.Message || !bytes.Equal(want.Error.Data, got.Error.Data) {
			t.Errorf("Error = %+v, want %+v", got.Error, want.Error)
		}
	}
}

// appendString quotes as a JSON encoder without HTML escaping does, fast
// path or not.
func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "tools/call", "<upstream> & co", `q"x`, `b\s`, "tab\t", "é", "\u2028", "\x7f"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		if got, want := string(appendString(nil, s)), strings.TrimSuffix(buf.String(), "\n"); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}
