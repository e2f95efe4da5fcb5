package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// testMembers is a small interpreted tree: name, arguments and task in the
// root, progressToken in _meta, type/name/uri in ref.
var testMembers = NewMembers(map[string]*Members{
	"name":      nil,
	"arguments": nil,
	"task":      nil,
	"_meta":     NewMembers(map[string]*Members{"progressToken": nil, "io.example/level": nil}),
	"ref":       NewMembers(map[string]*Members{"type": nil, "name": nil, "uri": nil}),
})

func nest(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// manyMembers is an object of n distinct members k0..k{n-1}, then extra.
func manyMembers(n int, extra string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteString(extra)
	b.WriteByte('}')
	return b.String()
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		members *Members
		depth   int
		reason  Reason // 0: accepted
		member  string // Name of the error
		want    string // Want of a CaseVariant
		where   string // Where() of the error
	}{
		{name: "empty object", in: `{}`},
		{name: "scalars", in: ` [1,-0.5e+3,"s",true,false,null] `},
		{name: "same name in different objects", in: `{"a":{"a":1},"b":[{"a":1},{"a":2}],"c":{"a":{"a":0}}}`},
		{name: "names differing only in case are not duplicates", in: `{"a":1,"A":2}`},
		{name: "escapes that decode differently", in: `{"a\"":1,"a\\":2,"a/":3,"a\/b":4}`},

		{name: "duplicate at the root", in: `{"id":1,"id":2}`, reason: Duplicate, member: "id"},
		{name: "duplicate at depth", in: `{"params":{"arguments":{"repo":"acme/x","repo":"evil/x"}}}`, reason: Duplicate, member: "repo", where: "params.arguments"},
		{name: "duplicate with an escape", in: `{"params":{"name":"echo","n\u0061me":"add"}}`, reason: Duplicate, member: "name", where: "params"},
		{name: "both spellings escaped", in: `{"\u006eame":1,"na\u006de":2}`, reason: Duplicate, member: "name"},
		{name: "surrogate pair and UTF-8", in: `{"\ud83d\ude00":1,"😀":2}`, reason: Duplicate, member: "😀"},
		{name: "lone surrogate is U+FFFD", in: `{"\ud800":1,"\ufffd":2}`, reason: Duplicate, member: "\ufffd"},
		{name: "invalid UTF-8 is U+FFFD", in: "{\"\xff\":1,\"\xfe\":2}", reason: Duplicate, member: "\ufffd"},
		{name: "duplicate in an array of objects", in: `{"items":[{"a":1},{"b":1,"b":2}]}`, reason: Duplicate, member: "b", where: "items[1]"},
		{name: "duplicate of an object member", in: `{"a":{"x":1},"a":{"y":2}}`, reason: Duplicate, member: "a"},
		{name: "duplicate among many members", in: manyMembers(100, `,"k3":0`), reason: Duplicate, member: "k3"},
		{name: "duplicate first and last of many", in: `{"z":0,` + manyMembers(1000, `,"z":1`)[1:], reason: Duplicate, member: "z"},
		{name: "many members, none twice", in: manyMembers(5000, "")},
		{name: "dotted name in the path", in: `{"_meta":{"io.x/y":{"a":1,"a":1}}}`, reason: Duplicate, member: "a", where: `_meta["io.x/y"]`},

		{name: "interpreted names as spelled", in: `{"name":"n","arguments":{"NAME":1},"_meta":{"progressToken":1},"ref":{"type":"t","uri":"u"}}`, members: testMembers},
		{name: "upper case", in: `{"NAME":"delete_everything"}`, members: testMembers, reason: CaseVariant, member: "NAME", want: "name"},
		{name: "variant after the name", in: `{"name":"ci__safe_tool","NAME":"delete_everything"}`, members: testMembers, reason: CaseVariant, member: "NAME", want: "name"},
		{name: "escaped variant", in: `{"n\u0041me":1}`, members: testMembers, reason: CaseVariant, member: "nAme", want: "name"},
		{name: "Kelvin sign", in: `{"tas\u212a":{}}`, members: testMembers, reason: CaseVariant, member: "tas\u212a", want: "task"},
		{name: "Kelvin sign in UTF-8", in: "{\"tas\u212a\":{}}", members: testMembers, reason: CaseVariant, member: "tas\u212a", want: "task"},
		{name: "long s", in: `{"ta\u017fk":{}}`, members: testMembers, reason: CaseVariant, member: "ta\u017fk", want: "task"},
		{name: "variant inside _meta", in: `{"_meta":{"ProgressToken":1}}`, members: testMembers, reason: CaseVariant, member: "ProgressToken", want: "progressToken", where: "_meta"},
		{name: "variant of a dotted name", in: `{"_meta":{"io.example/Level":1}}`, members: testMembers, reason: CaseVariant, member: "io.example/Level", want: "io.example/level", where: "_meta"},
		{name: "variant inside ref", in: `{"ref":{"type":"ref/prompt","Name":"x"}}`, members: testMembers, reason: CaseVariant, member: "Name", want: "name", where: "ref"},
		{name: "not interpreted inside arguments", in: `{"arguments":{"Name":1,"_META":2}}`, members: testMembers},
		{name: "not interpreted under another member", in: `{"other":{"NAME":1},"list":[{"NAME":1}]}`, members: testMembers},
		{name: "a variant of a variant is not checked inside", in: `{"_Meta":{"x":1}}`, members: testMembers, reason: CaseVariant, member: "_Meta", want: "_meta"},
		{name: "dotless and dotted I do not fold to i", in: `{"ur\u0131":1,"ur\u0130":1,"argument\u00df":1}`, members: NewMembers(map[string]*Members{"uri": nil, "arguments": nil})},

		{name: "512 arrays", in: nest("[", "]", 512, "")},
		{name: "513 arrays", in: nest("[", "]", 513, ""), reason: TooDeep},
		{name: "513 objects", in: nest(`{"a":`, "}", 513, "1"), reason: TooDeep},
		{name: "depth limit option", in: `{"a":{"b":{"c":{}}}}`, depth: 3, reason: TooDeep, where: "a.b.c"},
		{name: "at the depth limit", in: `{"a":{"b":{"c":1}}}`, depth: 3},

		{name: "syntax: trailing comma", in: `{"a":1,}`, reason: Syntax},
		{name: "syntax: bad escape", in: `{"a":"\q"}`, reason: Syntax},
		{name: "syntax: short unicode escape", in: `{"a":"\u12"}`, reason: Syntax},
		{name: "syntax: control character", in: "{\"a\":\"\x01\"}", reason: Syntax},
		{name: "syntax: leading zero", in: `[01]`, reason: Syntax},
		{name: "syntax: bare minus", in: `[-]`, reason: Syntax},
		{name: "syntax: fraction without digits", in: `[1.]`, reason: Syntax},
		{name: "syntax: exponent without digits", in: `[1e+]`, reason: Syntax},
		{name: "syntax: literal prefix", in: `[tru]`, reason: Syntax},
		{name: "syntax: literal suffix", in: `[truex]`, reason: Syntax},
		{name: "syntax: two values", in: `{} {}`, reason: Syntax},
		{name: "syntax: unterminated", in: `{"a":[1,2`, reason: Syntax},
		{name: "syntax: empty", in: ``, reason: Syntax},
		{name: "syntax: number key", in: `{1:2}`, reason: Syntax},
		{name: "syntax: duplicate then garbage", in: `{"a":1,"a":2,}`, reason: Duplicate, member: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.in), CheckOptions{Members: tt.members, MaxDepth: tt.depth})
			if tt.reason == Syntax && json.Valid([]byte(tt.in)) {
				t.Fatalf("bad test: %q is valid JSON", tt.in)
			}
			if tt.reason == 0 {
				if err != nil {
					t.Fatalf("Check(%.80s) = %v, want nil", tt.in, err)
				}
				if !json.Valid([]byte(tt.in)) {
					t.Fatalf("Check accepted invalid JSON %.80s", tt.in)
				}
				return
			}
			var ce *CheckError
			if !errors.As(err, &ce) {
				t.Fatalf("Check(%.80s) = %v, want a *CheckError", tt.in, err)
			}
			if ce.Reason != tt.reason {
				t.Fatalf("reason = %v (%v), want %v", ce.Reason, ce, tt.reason)
			}
			if ce.Name != tt.member || ce.Want != tt.want {
				t.Errorf("Name, Want = %q, %q; want %q, %q", ce.Name, ce.Want, tt.member, tt.want)
			}
			if tt.reason != Syntax && tt.reason != TooDeep || tt.where != "" {
				if got := ce.Where(); got != tt.where {
					t.Errorf("Where() = %q, want %q", got, tt.where)
				}
			}
			if ce.Error() == "" {
				t.Error("empty message")
			}
		})
	}
}

func TestCheckErrorMessages(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`{"params":{"arguments":{"repo":1,"repo":2}}}`, `rawjson: duplicate member "repo" in params.arguments`},
		{`{"NAME":1}`, `rawjson: member "NAME" is a case variant of "name"`},
		{`{"_meta":{"tas\u212a":1},"tas\u212a":1}`, `rawjson: member "tas\u212a" is a case variant of "task"`},
		{nest("[", "]", 600, ""), "rawjson: nested deeper than 512 levels in [0][0][0][0][0][0][0][0]…"},
		{`{"a":"\q"}`, `rawjson: invalid JSON: invalid escape "\\q" in a string at offset 6`},
		{`{"` + strings.Repeat("é", 40) + `":1,"` + strings.Repeat("é", 40) + `":2}`, `rawjson: duplicate member "` + strings.Repeat(`\u00e9`, 32) + `"…`},
	}
	for _, tt := range tests {
		err := Check([]byte(tt.in), CheckOptions{Members: testMembers})
		if err == nil || err.Error() != tt.want {
			t.Errorf("Check(%.40s…) = %v\nwant %s", tt.in, err, tt.want)
		}
	}
}

// A case variant is exactly what encoding/json would take for the member:
// a struct field tagged with the name is set from it.
func TestCaseVariantsAreWhatEncodingJSONMatches(t *testing.T) {
	members := NewMembers(map[string]*Members{"uri": nil, "task": nil, "arguments": nil})
	keys := []string{
		"uri", "URI", "Uri", "ur\u0131", "ur\u0130", "\u0075ri", "uri ", "ur", "urii",
		"task", "TASK", "tas\u212a", "ta\u017fk", "TA\u017fK", "tas\u212A", "ta\u00dfk", `task\u0000`, `ta\u017fk`, `tas\u212a`, `\u0055RI`,
		"arguments", "ARGUMENTS", "argument\u017f", "argumentſ", "argumentS", "argument", "argumentss",
	}
	for _, k := range keys {
		var v struct {
			URI       *string `json:"uri"`
			Task      *string `json:"task"`
			Arguments *string `json:"arguments"`
		}
		doc := `{"` + k + `":"x"}`
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatalf("bad test %s: %v", doc, err)
		}
		var exact map[string]any
		_ = json.Unmarshal([]byte(doc), &exact)
		_, isExact := exact["uri"]
		if !isExact {
			_, isExact = exact["task"]
		}
		if !isExact {
			_, isExact = exact["arguments"]
		}
		matched := v.URI != nil || v.Task != nil || v.Arguments != nil
		err := Check([]byte(doc), CheckOptions{Members: members})
		var ce *CheckError
		variant := errors.As(err, &ce) && ce.Reason == CaseVariant
		if variant != (matched && !isExact) {
			t.Errorf("%s: Check says case variant %v (%v); encoding/json matched a field %v, exact %v", doc, variant, err, matched, isExact)
		}
	}
}

func TestCheckRoot(t *testing.T) {
	var got []string
	in := `{ "b" : [1, {"x":2}] , "a\u0062":"s", "c":{} }`
	err := Check([]byte(in), CheckOptions{Root: func(name, value []byte) {
		got = append(got, string(name)+"="+string(value))
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`b=[1, {"x":2}]`, `ab="s"`, `c={}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Root saw %q, want %q", got, want)
	}
}

func TestAppendUnquoted(t *testing.T) {
	for _, s := range []string{
		`plain`, `\"\\\/\b\f\n\r\t`, `\u00e9\u20ac`, `\ud83d\ude00`, `\ud800`, `\udc00\ud800`, `\ud800\u0041`,
		`\ud83dx`, "\xff\xfe", "\xed\xa0\x80", `é€😀`, `\u0000`, `a\ud83d\ud83d\ude00b`,
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+s+`"`), &want); err != nil {
			t.Fatalf("bad test %q: %v", s, err)
		}
		if got := string(AppendUnquoted(nil, []byte(s))); got != want {
			t.Errorf("AppendUnquoted(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestMembersTree(t *testing.T) {
	if got := strings.Join(testMembers.Names(), ","); got != "_meta,arguments,name,ref,task" {
		t.Errorf("Names = %s", got)
	}
	if testMembers.Inner("_meta").Inner("progressToken") != nil || testMembers.Inner("_meta") == nil || testMembers.Inner("nope") != nil {
		t.Error("Inner does not follow the tree")
	}
	var nilTree *Members
	if nilTree.Names() != nil || nilTree.Inner("x") != nil {
		t.Error("a nil tree has no members")
	}
}

// A document of many large objects reuses one table per depth: it checks
// them all and finds the one duplicate in the last.
func TestCheckManyLargeObjects(t *testing.T) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(manyMembers(50, ""))
	}
	ok := b.String() + "]"
	if err := Check([]byte(ok), CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := b.String() + "," + manyMembers(50, `,"k49":1`) + "]"
	var ce *CheckError
	if err := Check([]byte(bad), CheckOptions{}); !errors.As(err, &ce) || ce.Reason != Duplicate || ce.Where() != "[200]" {
		t.Fatalf("Check = %v, want the duplicate k49 in [200]", err)
	}
}

// Huge inputs: a 1 MiB string, 1 MiB of members, and the allocations a
// plain message costs (none).
func TestCheckHugeAndAllocations(t *testing.T) {
	big := `{"s":"` + strings.Repeat("x", 1<<20) + `"}`
	if err := Check([]byte(big), CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	members := manyMembers(60000, "")
	if err := Check([]byte(members), CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Check([]byte(manyMembers(60000, `,"k59999":0`)), CheckOptions{}); err == nil {
		t.Fatal("missed the duplicate at the end of 60,000 members")
	}
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","n":[1,2,{"a":null}]},"_meta":{"progressToken":"p"}}}`)
	if n := testing.AllocsPerRun(100, func() {
		if Check(msg, CheckOptions{Members: testMembers}) != nil {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("Check of a plain message allocates %v times, want 0", n)
	}
}

// Check records the members of the root member a MemberRecord names, as
// a scan of that object would find them, and nothing of the others.
func TestCheckRecord(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		members    []string // name as written, then value
		count      int
		escaped    bool
	}{
		{"members", `{"id":1,"result":{"a":[1,{"x":2}], "b" : "s" ,"c":{}},"z":{"q":1}}`, []string{`"a"`, `[1,{"x":2}]`, `"b"`, `"s"`, `"c"`, `{}`}, 3, false},
		{"empty", `{"result":{}}`, nil, 0, false},
		{"not an object", `{"result":[{"a":1}]}`, nil, 0, false},
		{"absent", `{"params":{"a":1}}`, nil, 0, false},
		{"escaped name", `{"result":{"\u0061":1}}`, []string{`"\u0061"`, `1`}, 1, true},
		{"more than kept", `{"result":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}}`, nil, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := MemberRecord{Of: "result"}
			if err := Check([]byte(tc.text), CheckOptions{Record: &rec}); err != nil {
				t.Fatal(err)
			}
			if rec.Count != tc.count || rec.Escaped != tc.escaped {
				t.Fatalf("count %d escaped %v, want %d %v", rec.Count, rec.Escaped, tc.count, tc.escaped)
			}
			var got []string
			for _, sp := range rec.Spans[:min(rec.Count, len(rec.Spans))] {
				end, err := skipString([]byte(tc.text), int(sp.Name))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, tc.text[sp.Name:end], tc.text[sp.Start:sp.End])
			}
			if tc.members != nil && !slices.Equal(got, tc.members) {
				t.Errorf("recorded %q, want %q", got, tc.members)
			}
		})
	}
}
