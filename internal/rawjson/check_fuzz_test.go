package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// refEvent is the first refusal a reference reading built on
// encoding/json's tokenizer finds, in document order.
type refEvent struct {
	reason     Reason
	name, want string
}

// refCheck walks data with json.Decoder (which decodes member names as
// every Go decoder does) and reports the first duplicate name, case
// variant of an interpreted name, or nesting beyond max — what Check must
// report for valid JSON.
func refCheck(data []byte, members *Members, max int) *refEvent {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(depth int, m *Members) (*refEvent, error)
	walk = func(depth int, m *Members) (*refEvent, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		delim, ok := tok.(json.Delim)
		if !ok {
			return nil, nil
		}
		if depth+1 > max {
			return &refEvent{reason: TooDeep}, nil
		}
		switch delim {
		case '[':
			for dec.More() {
				if ev, err := walk(depth+1, nil); ev != nil || err != nil {
					return ev, err
				}
			}
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if seen[k] {
					return &refEvent{reason: Duplicate, name: k}, nil
				}
				seen[k] = true
				var inner *Members
				for _, n := range m.Names() {
					if k == n {
						inner = m.Inner(n)
					} else if strings.EqualFold(k, n) {
						return &refEvent{reason: CaseVariant, name: k, want: n}, nil
					}
				}
				if ev, err := walk(depth+1, inner); ev != nil || err != nil {
					return ev, err
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return nil, err
	}
	ev, err := walk(0, members)
	if err != nil && !errors.Is(err, io.EOF) {
		panic("reference reading of valid JSON failed: " + err.Error())
	}
	return ev
}

// FuzzCheck checks Check against json.Valid and the reference reading:
// it accepts exactly the valid JSON without duplicates, case variants of
// interpreted names, or nesting beyond the limit, and names the same
// first problem; Root sees the root object's members as encoding/json does.
func FuzzCheck(f *testing.F) {
	for _, s := range objectSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"name":"echo","name":"add"}`,
		`{"name":"echo","n\u0061me":"add"}`,
		`{"name":"ci__safe_tool","NAME":"delete_everything"}`,
		`{"arguments":{"repo":"acme/x"},"arguments":{"repo":"evil/x"}}`,
		`{"tas\u212a":1,"_meta":{"progressToken":1,"PROGRESStoken":2}}`,
		`{"ref":{"type":"ref/prompt","name":"a","Name":"b"}}`,
		`[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]`,
		`{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":1}}}}}}}}}}}}}}}}}`,
		`{"\ud800":1,"\udbff":2}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"e":11}`,
	} {
		f.Add([]byte(s))
	}
	const max = 16
	f.Fuzz(func(t *testing.T, data []byte) {
		var root [][2]string
		err := Check(data, CheckOptions{Members: testMembers, MaxDepth: max, Root: func(name, value []byte) {
			if !json.Valid(value) {
				t.Fatalf("Root value %q is not valid JSON", value)
			}
			root = append(root, [2]string{string(name), string(value)})
		}})
		var ce *CheckError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("error %T is not a *CheckError", err)
		}
		if !json.Valid(data) {
			// The reference cannot say what comes first in invalid JSON;
			// a refusal for another reason is fine as long as it is one.
			if err == nil {
				t.Fatalf("Check accepted invalid JSON %q", data)
			}
			return
		}
		if ce != nil && ce.Reason == Syntax {
			t.Fatalf("Check called valid JSON %q invalid: %v", data, err)
		}
		ev := refCheck(data, testMembers, max)
		switch {
		case ev == nil && err != nil:
			t.Fatalf("Check(%q) = %v; the reference finds nothing wrong", data, err)
		case ev != nil && err == nil:
			t.Fatalf("Check accepted %q; the reference finds %+v", data, ev)
		case ev != nil && (ev.reason != ce.Reason || ev.name != ce.Name || ev.want != ce.Want):
			t.Fatalf("Check(%q) = %v (%q, %q); the reference finds %+v", data, err, ce.Name, ce.Want, ev)
		}
		if err != nil {
			return
		}
		// Accepted: the root members are encoding/json's, in order.
		trimmed := bytes.Trim(data, " \t\r\n")
		if trimmed[0] != '{' {
			if len(root) > 0 {
				t.Fatalf("Root called for a non-object: %q", root)
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) != len(root) {
			t.Fatalf("Root saw %d members, encoding/json %d", len(root), len(m))
		}
		for _, r := range root {
			name, value := r[0], r[1]
			if v, ok := m[name]; !ok || !bytes.Equal(bytes.TrimSpace(v), []byte(value)) {
				t.Fatalf("Root saw %q = %s; encoding/json %s", name, value, v)
			}
		}
	})
}

// FuzzAppendUnquoted checks that member names decode as encoding/json
// decodes them.
func FuzzAppendUnquoted(f *testing.F) {
	for _, s := range []string{`a`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\udc00\ud800`, "\xff", `\"\\\/\b\f\n\r\t`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		quoted := append(append([]byte{'"'}, raw...), '"')
		var want string
		if json.Unmarshal(quoted, &want) != nil {
			return
		}
		if got := string(AppendUnquoted(nil, raw)); got != want {
			t.Fatalf("AppendUnquoted(%q) = %q, want %q", raw, got, want)
		}
	})
}
