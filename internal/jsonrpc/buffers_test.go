package jsonrpc

import (
	"bytes"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Buffers writes what Encode writes, and a large raw member goes out as
// the very bytes it came in (no copy), small ones inside the envelope.
func TestBuffersIsEncode(t *testing.T) {
	big := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("y", 4096) + `"}]}`)
	for _, tc := range []struct {
		name string
		msg  *Message
		big  []byte // a member that must be a piece of its own (nil: none)
	}{
		{"small request", NewRequest(IntID(1), "tools/call", json.RawMessage(tricky)), nil},
		{"small result", NewResult(ID(`"r"`), json.RawMessage(`{"a":1}`)), nil},
		{"default result", NewResult(IntID(2), nil), nil},
		{"error", NewError(nil, Errorf(CodeParseError, "bad <x>")), nil},
		{"big result", NewResult(IntID(3), big), big},
		{"big params", NewRequest(IntID(4), "m", big), big},
		{"big error data", NewError(IntID(5), &Error{Code: -1, Message: "m", Data: big}), big},
		{"big result with edits", &Message{JSONRPC: "2.0", ID: IntID(6), Result: big,
			ResultEdits: []Edit{{Start: 1, End: 1, With: []byte(`"resultType":"complete",`)}, {Start: len(big) - 1, End: len(big) - 1, With: []byte(`,"ttlMs":0`)}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := Encode(tc.msg)
			bufs := Buffers(tc.msg)
			if got := bytes.Join(bufs, nil); !bytes.Equal(got, want) {
				t.Fatalf("Buffers = %s\nEncode  = %s", got, want)
			}
			if !json.Valid(want) {
				t.Fatalf("not JSON: %s", want)
			}
			if tc.big != nil {
				shared := false
				for _, p := range bufs {
					shared = shared || (len(p) == len(tc.big) && unsafe.SliceData(p) == unsafe.SliceData(tc.big))
				}
				if !shared {
					t.Errorf("the %d-byte member was copied, not handed out (%d pieces)", len(tc.big), len(bufs))
				}
			}
		})
	}
}

// Edits change the result where it is written, in order; Result itself
// keeps the upstream's bytes until ApplyEdits folds them in.
func TestResultEdits(t *testing.T) {
	res := `{"a":1,"_meta":{"x":2}}`
	for _, tc := range []struct {
		name  string
		edits []Edit
		want  string
	}{
		{"none", nil, res},
		{"insert at the end", []Edit{{Start: len(res) - 1, End: len(res) - 1, With: []byte(`,"resultType":"complete"`)}}, `{"a":1,"_meta":{"x":2},"resultType":"complete"}`},
		{"replace a member and insert", []Edit{{Start: 15, End: 22, With: []byte(`{"x":3}`)}, {Start: len(res) - 1, End: len(res) - 1, With: []byte(`,"b":0`)}}, `{"a":1,"_meta":{"x":3},"b":0}`},
		{"out of order is skipped", []Edit{{Start: 10, End: 10, With: []byte(`!`)}, {Start: 2, End: 2, With: []byte(`?`)}}, `{"a":1,"_m!eta":{"x":2}}`},
		{"past the end is skipped", []Edit{{Start: 3, End: 99, With: []byte(`!`)}}, res},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Message{JSONRPC: "2.0", ID: IntID(1), Result: json.RawMessage(res), ResultEdits: tc.edits}
			b, _ := Encode(m)
			if want := `{"jsonrpc":"2.0","id":1,"result":` + tc.want + `}`; string(b) != want {
				t.Errorf("Encode = %s, want %s", b, want)
			}
			if string(m.Result) != res {
				t.Errorf("Result changed to %s", m.Result)
			}
			m.ApplyEdits()
			if string(m.Result) != tc.want || m.ResultEdits != nil {
				t.Errorf("after ApplyEdits: %s %v, want %s", m.Result, m.ResultEdits, tc.want)
			}
		})
	}
}

// Encode sizes its buffer once: a large answer is not copied twice. (The
// bytes allocated are measured, not the count: a stray allocation of the
// runtime's would make a count flaky, and cannot add a megabyte.)
func TestEncodeAllocatesOnce(t *testing.T) {
	m := NewResult(IntID(12345), json.RawMessage(`{"t":"`+strings.Repeat("z", 1<<20)+`"}`))
	perCall := func() uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 5 {
			_, _ = Encode(m)
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 5
	}
	if got, limit := perCall(), uint64(len(m.Result)+len(m.Result)/16); got > limit {
		t.Errorf("Encode allocates %d bytes for a %d-byte result, want at most %d", got, len(m.Result), limit)
	}
	m.ResultEdits = []Edit{{Start: 1, End: 1, With: []byte(`"resultType":"complete",`)}}
	if got, limit := perCall(), uint64(len(m.Result)+len(m.Result)/16); got > limit {
		t.Errorf("Encode with an edit allocates %d bytes for a %d-byte result, want at most %d", got, len(m.Result), limit)
	}
}

// ParseOwned keeps spans of the buffer it is handed; Parse copies.
func TestParseOwnedSharesTheBuffer(t *testing.T) {
	buf := []byte(` {"jsonrpc":"2.0","id":"a","result":{"x":1}}`)
	m, err := ParseOwned(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.ID) != `"a"` || string(m.Result) != `{"x":1}` {
		t.Fatalf("parsed %+v", m)
	}
	if unsafe.SliceData(m.Result) != &buf[strings.Index(string(buf), `{"x"`)] {
		t.Error("ParseOwned copied the result")
	}
	buf[2] = 'X' // the id is the message's own
	if string(m.ID) != `"a"` {
		t.Errorf("id changed with the buffer: %s", m.ID)
	}
	p, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"result":{"x":1}}`))
	if err != nil || string(p.Result) != `{"x":1}` {
		t.Fatalf("Parse: %+v %v", p, err)
	}
}

// ResultMembers gives what a scan of Result would, from the parse; it
// declines (for the caller to scan) whenever its record may not be
// Result's.
func TestResultMembers(t *testing.T) {
	type member struct {
		name, value string
	}
	scan := func(res []byte) []member {
		var out []member
		_ = rawjson.EachField(res, func(f rawjson.Field) bool { out = append(out, member{f.Key, string(res[f.Start:f.End])}); return true })
		return out
	}
	for _, tc := range []struct {
		name string
		msg  string
		ok   bool
	}{
		{"a result", ` {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a"}], "isError" : false,"_meta":{"k":{"x":1}}}}` + "\n", true},
		{"empty result", `{"jsonrpc":"2.0","id":1,"result":{}}`, true},
		{"eight members", `{"jsonrpc":"2.0","id":1,"result":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}}`, true},
		{"nine members", `{"jsonrpc":"2.0","id":1,"result":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}}`, false},
		{"an escaped name", `{"jsonrpc":"2.0","id":1,"result":{"a":1,"r\u0065sultType":"complete"}}`, false},
		{"params are not a result", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}`, false},
		{"a result that is not an object", `{"jsonrpc":"2.0","id":1,"result":[{"a":1}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, parse := range []func([]byte) (*Message, error){Parse, ParseOwned} {
				m, err := parse([]byte(tc.msg))
				if err != nil {
					t.Fatal(err)
				}
				var got []member
				ok := m.ResultMembers(func(name string, start, end int) { got = append(got, member{name, string(m.Result[start:end])}) })
				if ok != tc.ok {
					t.Fatalf("ResultMembers = %v, want %v", ok, tc.ok)
				}
				if ok && !slices.Equal(got, scan(m.Result)) {
					t.Errorf("members %q, a scan gives %q", got, scan(m.Result))
				}
				// A result set or edited since is not the one recorded.
				c := *m
				c.Result = append(json.RawMessage(nil), m.Result...)
				if c.ResultMembers(func(string, int, int) {}) {
					t.Error("a replaced Result reused the record")
				}
				c = *m
				c.ResultEdits = []Edit{{Start: 1, End: 1, With: []byte(" ")}}
				c.ApplyEdits()
				if c.ResultMembers(func(string, int, int) {}) {
					t.Error("an edited Result reused the record")
				}
			}
		})
	}
	if NewResult(IntID(1), json.RawMessage(`{"a":1}`)).ResultMembers(func(string, int, int) {}) {
		t.Error("a message Parse did not read has a record")
	}
}
