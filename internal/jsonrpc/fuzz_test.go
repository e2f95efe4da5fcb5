package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

var parseSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"x"}}`,
	`{"jsonrpc":"2.0","id":"a","method":"m","params":[1,2]}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":1.0,"result":{ "a" : "\u003c" }}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"<x>","data":[ 1 ]}}`,
	`{"jsonrpc":"2.0","id":"x\u00e9","error":{"code":1,"message":"m"},"result":1}`,
	`[{"jsonrpc":"2.0","method":"m"}]`,
	`{"jsonrpc":"2.0","id":{},"method":"m"}`,
	`{"JSONRPC":"2.0","ID":1,"Method":"m","method":"n"}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"result":null,"params":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"add"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[{"b":1,"b\u0000":2,"b":3}]}}`,
	" \n{\"jsonrpc\":\"2.0\",\"method\":\"m\\u0000\\ud800\"}\t",
	"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
	`"2.0"`,
	`{`,
	``,
}

// FuzzParse checks that Parse never panics, accepts only valid JSON, and that
// whatever it accepts survives Encode and a second Parse unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			var je *Error
			if !errors.As(err, &je) {
				t.Fatalf("error %T is not a *jsonrpc.Error", err)
			}
			valid := json.Valid(data)
			switch {
			case je.Code == CodeParseError && valid:
				t.Fatalf("parse error %q for valid JSON", je.Message)
			case je.Code == CodeInvalidRequest && !valid:
				t.Fatalf("invalid request %q for invalid JSON", je.Message)
			case je.Code != CodeParseError && je.Code != CodeInvalidRequest:
				t.Fatalf("unexpected code %d", je.Code)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("Parse accepted invalid JSON %q", data)
		}
		if k := m.Kind(); k != KindRequest && k != KindNotification && k != KindResponse {
			t.Fatalf("Kind = %v", k)
		}
		// One reading: a decoder that keeps the last duplicate and matches
		// names case-insensitively (encoding/json into a struct) reads the
		// same envelope.
		var std struct {
			ID     json.RawMessage
			Method string
			Params json.RawMessage
			Result json.RawMessage
		}
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatalf("encoding/json cannot read what Parse accepted: %v", err)
		}
		if std.Method != m.Method || !bytes.Equal(std.ID, m.ID) || !bytes.Equal(std.Params, m.Params) || !bytes.Equal(std.Result, m.Result) {
			t.Fatalf("Parse read method %q id %s params %s result %s; encoding/json %q %s %s %s", m.Method, m.ID, m.Params, m.Result, std.Method, std.ID, std.Params, std.Result)
		}
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		if !json.Valid(b) {
			t.Fatalf("Encode gave invalid JSON %q", b)
		}
		m2, err := Parse(b)
		if err != nil {
			t.Fatalf("re-Parse(%q): %v", b, err)
		}
		if m.Kind() != m2.Kind() {
			t.Fatalf("Kind %v became %v", m.Kind(), m2.Kind())
		}
		if m.Method != m2.Method {
			t.Fatalf("Method %q became %q", m.Method, m2.Method)
		}
		if !bytes.Equal(m.ID, m2.ID) {
			t.Fatalf("ID %q became %q", m.ID, m2.ID)
		}
		if !bytes.Equal(m.Params, m2.Params) {
			t.Fatalf("Params %q became %q", m.Params, m2.Params)
		}
		if !bytes.Equal(m.Result, m2.Result) {
			t.Fatalf("Result %q became %q", m.Result, m2.Result)
		}
		if (m.Error == nil) != (m2.Error == nil) {
			t.Fatalf("Error %v became %v", m.Error, m2.Error)
		}
		if m.Error != nil && (m.Error.Code != m2.Error.Code || m.Error.Message != m2.Error.Message || !bytes.Equal(m.Error.Data, m2.Error.Data)) {
			t.Fatalf("Error %+v became %+v", m.Error, m2.Error)
		}
		// A second round trip is a fixed point.
		b2, _ := Encode(m2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("Encode not stable:\n%q\n%q", b, b2)
		}
	})
}

// FuzzIDValid checks ID.Valid's hand-written fast paths against
// encoding/json: an id is valid exactly when it is one JSON string or
// number.
func FuzzIDValid(f *testing.F) {
	for _, s := range []string{`1`, `-0`, `-1.5e+3`, `1E9`, `01`, `1.`, `.5`, `-`, `1e`, `"a"`, `""`, `"a\"b"`, `"\u00e9"`, "\"\x01\"", "\"\xff\"", `"a`, `a"`, `"`, `null`, `1 `, ` 1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := false
		if len(b) > 0 {
			switch b[0] {
			case '"':
				var s string
				want = json.Unmarshal(b, &s) == nil
			case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				var n json.Number
				want = json.Unmarshal(b, &n) == nil
			}
		}
		if got := ID(b).Valid(); got != want {
			t.Fatalf("ID(%q).Valid() = %v, encoding/json says %v", b, got, want)
		}
	})
}
