package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

var objectSeeds = []string{
	`{}`,
	` { } `,
	`{"a":1,"b":[1,{"c":"}"}],"d":{"e":null}}`,
	"{\n\t\"a\" : \"x\\\"y\\\\\" ,\r\n \"b\":true }\n",
	`{"na\u006de":"v","\ud83d\ude00":"\u00e9"}`,
	`{"a":1,"a":2,"b":3,"a":4}`,
	`{"":"","\\":"\\","\"":"\""}`,
	`{"a":[[],[{}],"]}"],"b":-1.5e+10}`,
	`{"a":"\q"}`,
	`{"a":1,}`,
	`[1,2]`,
	"{\"\xff\":\"\xfe\"}",
}

// FuzzFields checks that Fields never panics, accepts exactly the objects
// json.Valid accepts, and agrees with encoding/json on their members.
func FuzzFields(f *testing.F) {
	for _, s := range objectSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := Fields(data)
		trimmed := bytes.Trim(data, " \t\r\n")
		isObject := json.Valid(data) && len(trimmed) > 0 && trimmed[0] == '{'
		if err != nil {
			if isObject {
				t.Fatalf("Fields rejected a valid object: %v", err)
			}
			return
		}
		if !isObject {
			t.Fatalf("Fields accepted %q, which is not a valid JSON object", data)
		}
		last := 0
		counts := map[string]int{}
		for _, f := range fields {
			if f.Start < last || f.End < f.Start || f.End > len(data) {
				t.Fatalf("bad span %d:%d after %d", f.Start, f.End, last)
			}
			last = f.End
			if !bytes.Equal(data[f.Start:f.End], f.Value) {
				t.Fatalf("Value %q is not data[%d:%d]", f.Value, f.Start, f.End)
			}
			if !json.Valid(f.Value) {
				t.Fatalf("Value %q is not valid JSON", f.Value)
			}
			counts[f.Key]++
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("encoding/json could not decode %q: %v", data, err)
		}
		if len(m) != len(counts) {
			t.Fatalf("%d distinct keys, encoding/json found %d", len(counts), len(m))
		}
		for _, f := range fields {
			want, ok := m[f.Key]
			if !ok {
				t.Fatalf("key %q unknown to encoding/json", f.Key)
			}
			if counts[f.Key] == 1 && !bytes.Equal(want, f.Value) {
				t.Fatalf("key %q: value %q, encoding/json has %q", f.Key, f.Value, want)
			}
			if v, ok := Get(data, f.Key); !ok || (counts[f.Key] == 1 && !bytes.Equal(v, f.Value)) {
				t.Fatalf("Get(%q) = %q, %v", f.Key, v, ok)
			}
		}
	})
}

// FuzzSetDelete checks Set and Delete on arbitrary objects, keys and values.
func FuzzSetDelete(f *testing.F) {
	values := []string{`1`, `"v"`, `{ "x" : [ ] }`, `null`, `"\u003c\""`}
	for i, s := range objectSeeds {
		f.Add([]byte(s), []string{"a", "name", "b", "", `"`, "\\", "zz"}[i%7], []byte(values[i%len(values)]))
	}
	f.Fuzz(func(t *testing.T, obj []byte, key string, value []byte) {
		if !utf8.ValidString(key) {
			// Keys are decoded (invalid UTF-8 becomes U+FFFD), so such a key
			// can never match; the gateway's keys are Go constants.
			return
		}
		value = bytes.Trim(value, " \t\r\n")
		if !json.Valid(value) {
			value, _ = json.Marshal(string(value))
		}
		orig := append([]byte(nil), obj...)
		before, ferr := Fields(obj)

		out, err := Set(obj, key, value)
		if (err == nil) != (ferr == nil) {
			t.Fatalf("Set error %v, Fields error %v", err, ferr)
		}
		if !bytes.Equal(obj, orig) {
			t.Fatal("Set modified its input")
		}
		if err == nil {
			if !json.Valid(out) {
				t.Fatalf("Set(%q, %q, %q) = %q, not valid JSON", obj, key, value, out)
			}
			if got, ok := Get(out, key); !ok || !bytes.Equal(got, value) {
				t.Fatalf("Get after Set = %q, %v; want %q", got, ok, value)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if !bytes.Equal(m[key], value) {
				t.Fatalf("encoding/json sees %q for %q, want %q", m[key], key, value)
			}
			after, err := Fields(out)
			if err != nil {
				t.Fatalf("Fields(%q): %v", out, err)
			}
			// Every member keeps its key and, but for key, its value bytes;
			// at most one member is appended.
			if len(after) != len(before) && len(after) != len(before)+1 {
				t.Fatalf("%d members became %d", len(before), len(after))
			}
			for i, f := range before {
				if after[i].Key != f.Key || (f.Key != key && !bytes.Equal(after[i].Value, f.Value)) {
					t.Fatalf("member %d %q=%q became %q=%q", i, f.Key, f.Value, after[i].Key, after[i].Value)
				}
			}
		}

		out, err = Delete(obj, key)
		if (err == nil) != (ferr == nil) {
			t.Fatalf("Delete error %v, Fields error %v", err, ferr)
		}
		if !bytes.Equal(obj, orig) {
			t.Fatal("Delete modified its input")
		}
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Delete(%q, %q) = %q, not valid JSON", obj, key, out)
		}
		if _, ok := Get(out, key); ok {
			t.Fatalf("Delete(%q, %q) = %q still has the key", obj, key, out)
		}
		after, err := Fields(out)
		if err != nil {
			t.Fatalf("Fields(%q): %v", out, err)
		}
		j := 0
		for _, f := range before {
			if f.Key == key {
				continue
			}
			if j >= len(after) || after[j].Key != f.Key || !bytes.Equal(after[j].Value, f.Value) {
				t.Fatalf("Delete(%q, %q) = %q lost or changed member %q", obj, key, out, f.Key)
			}
			j++
		}
		if j != len(after) {
			t.Fatalf("Delete(%q, %q) = %q has extra members", obj, key, out)
		}
	})
}
