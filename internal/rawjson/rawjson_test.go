package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

type kv struct{ key, value string }

func TestFields(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []kv
	}{
		{"empty object", `{}`, nil},
		{"empty object with whitespace", " \t\r\n{ \n\t}\r\n ", nil},
		{"one member", `{"a":1}`, []kv{{"a", "1"}}},
		{"whitespace everywhere",
			" \n{ \"a\" \t:\r\n 1 ,\n\t\"b\"  :  [ 1 , { \"c\" : null } ]  ,\"d\":\"x y\"\n}\n ",
			[]kv{{"a", "1"}, {"b", `[ 1 , { "c" : null } ]`}, {"d", `"x y"`}}},
		{"all value kinds",
			`{"s":"str","n":-1.5e+10,"t":true,"f":false,"z":null,"o":{},"a":[]}`,
			[]kv{{"s", `"str"`}, {"n", `-1.5e+10`}, {"t", `true`}, {"f", `false`}, {"z", `null`}, {"o", `{}`}, {"a", `[]`}}},
		{"escaped quotes and backslashes in keys",
			`{"a\"b":1,"c\\":2,"\\\"":3,"\\":4}`,
			[]kv{{`a"b`, "1"}, {`c\`, "2"}, {`\"`, "3"}, {`\`, "4"}}},
		{"escaped quotes and backslashes in values",
			`{"v":"x\"}y\\","w":"\\","x":"\\\"{"}`,
			[]kv{{"v", `"x\"}y\\"`}, {"w", `"\\"`}, {"x", `"\\\"{"`}}},
		{"braces and brackets inside strings of nested values",
			`{"n":{"s":"}{][","a":["]",{"x":"{\"}"}]},"z":true}`,
			[]kv{{"n", `{"s":"}{][","a":["]",{"x":"{\"}"}]}`}, {"z", "true"}}},
		{"unicode escapes in keys", `{"na\u006de":"v","\u00e9":1,"\ud83d\ude00":2}`,
			[]kv{{"name", `"v"`}, {"é", "1"}, {"😀", "2"}}},
		{"raw UTF-8 key", `{"ключ":"значение"}`, []kv{{"ключ", `"значение"`}}},
		{"escaped slash and control escapes", `{"a\/b\n":"\b\f\n\r\t\/"}`, []kv{{"a/b\n", `"\b\f\n\r\t\/"`}}},
		{"duplicate keys are all listed", `{"a":1,"a":2}`, []kv{{"a", "1"}, {"a", "2"}}},
		{"empty key", `{"":0}`, []kv{{"", "0"}}},
		{"deep nesting", `{"a":[[[[{"b":[[]]}]]]]}`, []kv{{"a", `[[[[{"b":[[]]}]]]]`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := []byte(tt.in)
			fields, err := Fields(obj)
			if err != nil {
				t.Fatalf("Fields: %v", err)
			}
			var got []kv
			for _, f := range fields {
				got = append(got, kv{f.Key, string(f.Value)})
				if !bytes.Equal(obj[f.Start:f.End], f.Value) {
					t.Errorf("obj[%d:%d] = %q, want the value %q", f.Start, f.End, obj[f.Start:f.End], f.Value)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Fields = %q\nwant %q", got, tt.want)
			}
		})
	}
}

var invalidObjects = []string{
	``,
	`   `,
	`[]`,
	`1`,
	`"{}"`,
	`null`,
	`{`,
	`}`,
	`{"a"}`,
	`{"a":}`,
	`{"a" 1}`,
	`{"a":1,}`,
	`{,}`,
	`{,"a":1}`,
	`{"a":1 "b":2}`,
	`{"a":1}x`,
	`{"a":1}}`,
	`{"a":1}{}`,
	`{a:1}`,
	`{'a':1}`,
	`{"a":tru}`,
	`{"a":nul}`,
	`{"a":01}`,
	`{"a":1.}`,
	`{"a":-}`,
	`{"a":+1}`,
	`{"a":.5}`,
	`{"a":"unterminated}`,
	`{"a":"\q"}`,
	`{"a":"\u12"}`,
	`{"a":"\u12g4"}`,
	`{"a":"\`,
	`{"a\x":1}`,
	"{\"a\":\"x\ny\"}",
	"{\"a\":\"\\\x01\"}",
	"{\"a\x01\":1}",
	`{"a":[1,]}`,
	`{"a":[1 2]}`,
	`{"a":{]}`,
	`{"a":[}`,
	`{"a":{"b"}}`,
	`{"a":[1]]}`,
	`{"a":{"b":1}`,
	`{"a":1]`,
	"\f{}",
}

func TestInvalidObjects(t *testing.T) {
	for _, in := range invalidObjects {
		t.Run(in, func(t *testing.T) {
			obj := []byte(in)
			if _, err := Fields(obj); err == nil {
				t.Errorf("Fields(%q) succeeded", in)
			}
			if _, err := Set(obj, "a", []byte("2")); err == nil {
				t.Errorf("Set(%q) succeeded", in)
			}
			if _, err := Set(obj, "zz", []byte("2")); err == nil {
				t.Errorf("Set(%q) of an absent key succeeded", in)
			}
			if _, err := Delete(obj, "a"); err == nil {
				t.Errorf("Delete(%q) succeeded", in)
			}
			if _, err := SetString(obj, "b", "x"); err == nil {
				t.Errorf("SetString(%q) succeeded", in)
			}
			Get(obj, "a") // must not panic
			GetString(obj, "a")
		})
	}
}

func TestNotObjectError(t *testing.T) {
	for _, in := range []string{``, `[]`, `1`, ` "x"`} {
		if _, err := Fields([]byte(in)); !errors.Is(err, ErrNotObject) {
			t.Errorf("Fields(%q) = %v, want ErrNotObject", in, err)
		}
	}
	var se *syntaxError
	if _, err := Fields([]byte(`{"a":}`)); !errors.As(err, &se) || se.Error() == "" {
		t.Errorf("want a syntax error, got %v", err)
	}
}

func TestEachFieldStops(t *testing.T) {
	var keys []string
	// EachField stops at the first false without reading further.
	err := EachField([]byte(`{"a":1,"b":2,"c":3}`), func(f Field) bool {
		keys = append(keys, f.Key)
		return f.Key != "b"
	})
	if err != nil || !reflect.DeepEqual(keys, []string{"a", "b"}) {
		t.Errorf("keys = %v, err = %v", keys, err)
	}
}

func TestGet(t *testing.T) {
	obj := []byte(` { "a" : { "b" : [ 1 ] } , "na\u006de":"v", "dup":1, "dup":2, "s":"x\"y" } `)
	tests := []struct {
		key   string
		want  string
		found bool
	}{
		{"a", `{ "b" : [ 1 ] }`, true},
		{"name", `"v"`, true},
		{`na\u006de`, "", false},
		// With duplicate keys Get returns the first value, unlike
		// encoding/json, which keeps the last.
		{"dup", "1", true},
		{"s", `"x\"y"`, true},
		{"b", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, found := Get(obj, tt.key)
		if found != tt.found || string(got) != tt.want {
			t.Errorf("Get(%q) = %q, %v; want %q, %v", tt.key, got, found, tt.want, tt.found)
		}
	}
	if _, found := Get(nil, "a"); found {
		t.Error("Get(nil) found a value")
	}
}

func TestGetString(t *testing.T) {
	obj := []byte(`{"s":"a\"b\\\u00e9<","n":1,"z":null,"o":{"s":"x"},"e":""}`)
	tests := []struct {
		key  string
		want string
		ok   bool
	}{
		{"s", `a"b\é<`, true},
		{"e", "", true},
		{"n", "", false},
		{"z", "", false},
		{"o", "", false},
		{"missing", "", false},
	}
	for _, tt := range tests {
		got, ok := GetString(obj, tt.key)
		if ok != tt.ok || got != tt.want {
			t.Errorf("GetString(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSetReplacesOnlyTheValue(t *testing.T) {
	objs := []string{
		`{"a":1}`,
		` { "x" : "}" , "a"	:	[ 1, { "b": "]" } ] ,` + "\n" + `"y":{"a":2} } `,
		`{"y":"\"a\":3","a":"old\\","z":null}`,
		`{"na\u006de":0,"a":true}`,
	}
	values := []string{`2`, `"new \"value\" <&>"`, `{ "nested" : [ ] }`, `null`, `""`}
	for _, in := range objs {
		for _, v := range values {
			obj := []byte(in)
			fields, err := Fields(obj)
			if err != nil {
				t.Fatal(err)
			}
			var f Field
			for _, g := range fields {
				if g.Key == "a" {
					f = g
					break
				}
			}
			out, err := Set(obj, "a", []byte(v))
			if err != nil {
				t.Fatalf("Set(%s): %v", in, err)
			}
			want := in[:f.Start] + v + in[f.End:]
			if string(out) != want {
				t.Errorf("Set(%s, a, %s) = %s\nwant %s", in, v, out, want)
			}
			if !bytes.HasPrefix(out, obj[:f.Start]) || !bytes.HasSuffix(out, obj[f.End:]) {
				t.Errorf("Set changed bytes outside the value: %s", out)
			}
			if !json.Valid(out) {
				t.Errorf("Set gave invalid JSON %s", out)
			}
			if got, _ := Get(out, "a"); string(got) != v {
				t.Errorf("Get after Set = %s, want %s", got, v)
			}
			if string(obj) != in {
				t.Errorf("Set modified its input: %s", obj)
			}
		}
	}
}

func TestSetAppends(t *testing.T) {
	tests := []struct {
		in, key, value, want string
	}{
		{`{}`, "k", `1`, `{"k":1}`},
		{`{ }`, "k", `1`, `{ "k":1}`},
		{" \n{\n}\n ", "k", `"v"`, " \n{\n\"k\":\"v\"}\n "},
		{`{"a":1}`, "k", `[1, 2]`, `{"a":1,"k":[1, 2]}`},
		{`{ "a" : { "k" : 1 } } `, "k", `2`, `{ "a" : { "k" : 1 } ,"k":2} `},
		{`{"a":"}"}`, "k", `true`, `{"a":"}","k":true}`},
		{`{"a":1}`, `q"<\`, `0`, `{"a":1,"q\"\u003c\\":0}`},
		{`{"a":1}`, "name", `0`, `{"a":1,"name":0}`},
	}
	for _, tt := range tests {
		out, err := Set([]byte(tt.in), tt.key, []byte(tt.value))
		if err != nil {
			t.Fatalf("Set(%s): %v", tt.in, err)
		}
		if string(out) != tt.want {
			t.Errorf("Set(%q, %q, %s) = %q, want %q", tt.in, tt.key, tt.value, out, tt.want)
		}
		if !json.Valid(out) {
			t.Errorf("Set gave invalid JSON %s", out)
		}
		if got, ok := Get(out, tt.key); !ok || string(got) != tt.value {
			t.Errorf("Get after Set = %s, %v", got, ok)
		}
	}
}

// Set on "name" must find a key written "na\u006de".
func TestSetMatchesDecodedKey(t *testing.T) {
	out, err := Set([]byte(`{"na\u006de":"old"}`), "name", []byte(`"new"`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"na\u006de":"new"}` {
		t.Errorf("Set = %s", out)
	}
}

// A rewritten value must be what every decoder sees, whether it keeps the
// first or the last of duplicate keys.
func TestSetDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		str            bool // through SetString (its plain-string path)
	}{
		{"twice", `{"name":"a", "x":0, "name" : "evil"}`, `{"name":"up_a", "x":0, "name" : "up_a"}`, false},
		{"three times (more than Set keeps on its stack)", `{"name":"a","name":"b","x":0,"name":"c"}`, `{"name":"up_a","name":"up_a","x":0,"name":"up_a"}`, false},
		{"SetString, twice", `{"name":"a", "x":0, "name" : "evil"}`, `{"name":"up_a", "x":0, "name" : "up_a"}`, true},
		{"SetString, three times", `{"name":1,"name":2,"name":3}`, `{"name":"up_a","name":"up_a","name":"up_a"}`, true},
		{"SetString, absent", `{"x":0}`, `{"x":0,"name":"up_a"}`, true},
	} {
		var out []byte
		var err error
		if tc.str {
			out, err = SetString([]byte(tc.in), "name", "up_a")
		} else {
			out, err = Set([]byte(tc.in), "name", []byte(`"up_a"`))
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(out) != tc.want {
			t.Errorf("%s: Set = %s, want %s", tc.name, out, tc.want)
		}
		var m struct{ Name string }
		if err := json.Unmarshal(out, &m); err != nil || m.Name != "up_a" {
			t.Errorf("%s: encoding/json sees %v (%v)", tc.name, m, err)
		}
	}
}

func TestSetString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\`, "<tag>&amp;", "é\u2028\x00\n", "\xff"} {
		out, err := SetString([]byte(`{"k":"old","o":1}`), "k", s)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out) {
			t.Fatalf("SetString(%q) gave invalid JSON %s", s, out)
		}
		want := s
		if s == "\xff" {
			want = "\ufffd" // invalid UTF-8 is replaced, as encoding/json does
		}
		if got, ok := GetString(out, "k"); !ok || got != want {
			t.Errorf("GetString after SetString(%q) = %q, %v", s, got, ok)
		}
		if !bytes.HasSuffix(out, []byte(`,"o":1}`)) {
			t.Errorf("SetString touched other members: %s", out)
		}
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name, in, key, want string
	}{
		{"only", `{"a":1}`, "a", `{}`},
		{"only with whitespace", ` { "a" : 1 } `, "a", ` { } `},
		{"first", `{"a":1,"b":2,"c":3}`, "a", `{"b":2,"c":3}`},
		{"first with whitespace", "{ \"a\" : 1 ,\n \"b\" : 2 }", "a", "{\"b\" : 2 }"},
		{"middle", `{"a":1,"b":2,"c":3}`, "b", `{"a":1,"c":3}`},
		{"middle with whitespace", `{ "a":1 , "b" : 2 , "c":3 }`, "b", `{ "a":1 , "c":3 }`},
		{"last", `{"a":1,"b":2,"c":3}`, "c", `{"a":1,"b":2}`},
		{"last with whitespace", "{\"a\":1 ,\n\"c\" : 3\n}", "c", "{\"a\":1\n}"},
		{"nested value", `{"a":{"c":1},"c":[{"c":"}"}],"d":0}`, "c", `{"a":{"c":1},"d":0}`},
		{"escaped key", `{"a\\":1,"\"b":2,"c\"":3}`, `"b`, `{"a\\":1,"c\"":3}`},
		{"first before key ending in backslash", `{"x":1,"a\\":2}`, "x", `{"a\\":2}`},
		{"first before key with escaped quote", `{"x":1,  "\"":2}`, "x", `{"\"":2}`},
		{"unicode-escaped key", `{"na\u006de":1,"b":2}`, "name", `{"b":2}`},
		{"duplicates are all removed", `{"c":1,"a":0,"c":2, "c" : 3}`, "c", `{"a":0}`},
		{"duplicates only", `{"c":1,"c":2}`, "c", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := []byte(tt.in)
			out, err := Delete(obj, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("Delete(%s, %q) = %q, want %q", tt.in, tt.key, out, tt.want)
			}
			if !json.Valid(out) {
				t.Errorf("Delete gave invalid JSON %s", out)
			}
			if _, ok := Get(out, tt.key); ok {
				t.Errorf("key %q still present in %s", tt.key, out)
			}
			if string(obj) != tt.in {
				t.Errorf("Delete modified its input: %s", obj)
			}
			assertOtherFieldsKept(t, obj, out, tt.key)
		})
	}
}

func TestDeleteAbsentReturnsInput(t *testing.T) {
	obj := []byte(`{ "a" : 1 }`)
	out, err := Delete(obj, "b")
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &obj[0] || len(out) != len(obj) {
		t.Errorf("Delete of an absent key copied or changed the object: %s", out)
	}
	out, err = Delete([]byte(`{}`), "a")
	if err != nil || string(out) != `{}` {
		t.Errorf("Delete({}) = %s, %v", out, err)
	}
}

// assertOtherFieldsKept checks that out has exactly obj's members other than
// key, in order, with byte-identical values.
func assertOtherFieldsKept(t *testing.T, obj, out []byte, key string) {
	t.Helper()
	before, err := Fields(obj)
	if err != nil {
		t.Fatal(err)
	}
	after, err := Fields(out)
	if err != nil {
		t.Fatalf("Fields(%s): %v", out, err)
	}
	var want []kv
	for _, f := range before {
		if f.Key != key {
			want = append(want, kv{f.Key, string(f.Value)})
		}
	}
	var got []kv
	for _, f := range after {
		got = append(got, kv{f.Key, string(f.Value)})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("members after = %q, want %q", got, want)
	}
}

func TestElements(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`[]`, nil},
		{" \n[ \t]\n ", nil},
		{`[1]`, []string{"1"}},
		{`[ 1 , "a,]" ,{"x":[1,2]} , [ ] ,null,true,-0.5e-3, "\"]" ]`,
			[]string{"1", `"a,]"`, `{"x":[1,2]}`, `[ ]`, "null", "true", "-0.5e-3", `"\"]"`}},
		{`[[],[[]],{}]`, []string{"[]", "[[]]", "{}"}},
	}
	for _, tt := range tests {
		got, err := Elements([]byte(tt.in))
		if err != nil {
			t.Fatalf("Elements(%s): %v", tt.in, err)
		}
		var gs []string
		for _, e := range got {
			gs = append(gs, string(e))
		}
		if !reflect.DeepEqual(gs, tt.want) {
			t.Errorf("Elements(%s) = %q, want %q", tt.in, gs, tt.want)
		}
		re := AppendArray(nil, got)
		if !json.Valid(re) {
			t.Errorf("AppendArray gave invalid JSON %s", re)
		}
		back, err := Elements(re)
		if err != nil || len(back) != len(got) {
			t.Errorf("Elements(AppendArray) = %q, %v", back, err)
		}
	}
}

func TestElementsInvalid(t *testing.T) {
	for _, in := range []string{``, `{}`, `1`, `[`, `]`, `[1,]`, `[,]`, `[,1]`, `[1 2]`, `[1]x`, `[1]]`, `["\q"]`, `[tru]`, `[{]`, `[1}`, `["a]`} {
		if _, err := Elements([]byte(in)); err == nil {
			t.Errorf("Elements(%q) succeeded", in)
		}
	}
	if _, err := Elements([]byte(`{}`)); !errors.Is(err, ErrNotArray) {
		t.Errorf("Elements({}) = %v, want ErrNotArray", err)
	}
}

func TestAppendArray(t *testing.T) {
	tests := []struct {
		dst   string
		elems []string
		want  string
	}{
		{"", nil, `[]`},
		{"", []string{"1"}, `[1]`},
		{"", []string{`{ "a" : 1 }`, `"x"`, `[ ]`}, `[{ "a" : 1 },"x",[ ]]`},
		{`{"list":`, []string{"1", "2"}, `{"list":[1,2]`},
	}
	for _, tt := range tests {
		var elems [][]byte
		for _, e := range tt.elems {
			elems = append(elems, []byte(e))
		}
		var dst []byte
		if tt.dst != "" {
			dst = []byte(tt.dst)
		}
		if got := AppendArray(dst, elems); string(got) != tt.want {
			t.Errorf("AppendArray(%q, %q) = %s, want %s", tt.dst, tt.elems, got, tt.want)
		}
	}
}

// A member's nested value is validated in the pass that skips it: Get
// accepts exactly the objects json.Valid accepts, at any depth.
func TestGetNestedValidation(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, in := range []string{
		`{"a":{"b":[1,{"c":"\u00e9\n"}],"d":[],"e":{}},"z":1}`,
		`{"a":[ 1 , 2.5e3 , -0 , true , false , null , "s" ] ,"z":1}`,
		`{"a":{"b":},"z":1}`,
		`{"a":[1,],"z":1}`,
		`{"a":[1 2],"z":1}`,
		`{"a":{"b" 1},"z":1}`,
		`{"a":{1:2},"z":1}`,
		`{"a":[tru],"z":1}`,
		`{"a":[01],"z":1}`,
		`{"a":{"b":"\x01"},"z":1}`,
		`{"a":{"b":"\q"},"z":1}`,
		`{"a":[{"b":1}}],"z":1}`,
		`{"a":{"b":1,},"z":1}`,
		`{"a":` + deep(9998) + `,"z":1}`,
		`{"a":` + deep(10001) + `,"z":1}`,
	} {
		_, ok := Get([]byte(in), "z")
		if want := json.Valid([]byte(in)); ok != want {
			t.Errorf("Get(%.60q) found z: %v, want %v (json.Valid)", in, ok, want)
		}
	}
}

// validScalar accepts exactly the literals and numbers json.Valid accepts
// (its callers pass spans without whitespace).
func TestValidScalar(t *testing.T) {
	for _, s := range []string{
		"true", "false", "null", "0", "-0", "1", "-12", "1.5", "0.25e10", "1E+2", "1e-2", "123456789012345678901234567890",
		"", "-", "tru", "truex", "nul", "01", "1.", ".5", "1e", "1e+", "+1", "0x1", "1.5.2", "--1", "NaN", "Infinity", "-a",
	} {
		if got, want := validScalar([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validScalar(%q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

func FuzzValidScalar(f *testing.F) {
	for _, s := range []string{"0", "-1.5e3", "true", "01", "1e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validScalar([]byte(s)), json.Valid([]byte(s)) && !strings.ContainsAny(s, " \t\r\n\"[{"); got != want {
			t.Errorf("validScalar(%q) = %v, want %v", s, got, want)
		}
	})
}

// quote writes what json.Marshal writes, fast path or not.
func TestQuote(t *testing.T) {
	for _, s := range []string{"", "echo", "up__echo", "a b/c:d", `q"x`, `b\s`, "<b>&", "tab\t", "é", "\u2028", "\x7f", "~"} {
		want, _ := json.Marshal(s)
		if got := quote(s); string(got) != string(want) {
			t.Errorf("quote(%q) = %s, json.Marshal %s", s, got, want)
		}
	}
}

// plainRun stops at every quote, backslash and control character, at any
// offset in a word, never skips one, and tells whether it passed a byte
// that is not ASCII.
func TestPlainRun(t *testing.T) {
	for c := 0; c < 256; c++ {
		special := c < 0x20 || c == '"' || c == '\\'
		for pos := 0; pos < 24; pos++ {
			b := []byte(strings.Repeat("a", 24))
			b[pos] = byte(c)
			j, nonASCII := plainRun(b, 0)
			if special && j > pos {
				t.Fatalf("byte %#x at %d skipped (stopped at %d)", c, pos, j)
			}
			if !special && j < 16 {
				t.Fatalf("stopped at %d for plain byte %#x at %d", j, c, pos)
			}
			if want := c >= 0x80 && pos < j; nonASCII != want {
				t.Fatalf("byte %#x at %d, stopped at %d: nonASCII %v", c, pos, j, nonASCII)
			}
		}
	}
}
