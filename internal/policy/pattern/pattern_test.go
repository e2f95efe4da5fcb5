package pattern

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		glob string
		yes  []string
		no   []string
	}{
		{"github__create_issue", []string{"github__create_issue"}, []string{"github__create_issues", "github__create_issu", ""}},
		{"*", []string{"", "x", "a/b__c+d"}, nil},
		{"github__*", []string{"github__", "github__x", "github__a__b"}, []string{"github_x", "gitlab__x", "xgithub__x"}},
		{"*__delete_*", []string{"github__delete_repo", "a__delete_"}, []string{"github__remove", "delete_x"}},
		{"fs__read_?", []string{"fs__read_a", "fs__read_é"}, []string{"fs__read_", "fs__read_ab"}},
		{"fs+file:///data/*", []string{"fs+file:///data/a.md", "fs+file:///data/x/y/z"}, []string{"fs+file:///etc/passwd", "fs+file:///data"}},
		{"fs+file:///data/**", []string{"fs+file:///data/x/y"}, []string{"fs+file:///dat"}},
		{"a*b*c", []string{"abc", "aXbYc", "abcbc", "aabbcc", "abXc"}, []string{"ab", "acb", "abcx"}},
		{"*ab", []string{"ab", "aab", "abab"}, []string{"aba", "a"}},
		{`lit\*star`, []string{"lit*star"}, []string{"litXstar"}},
		{`q\?`, []string{"q?"}, []string{"qx"}},
		{`back\\`, []string{`back\`}, []string{`back`}},
		{"?*?", []string{"ab", "abc"}, []string{"a", ""}},
	} {
		g, err := Compile(tc.glob)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.glob, err)
		}
		for _, s := range tc.yes {
			if !g.Match(s) {
				t.Errorf("%q should match %q", tc.glob, s)
			}
		}
		for _, s := range tc.no {
			if g.Match(s) {
				t.Errorf("%q should not match %q", tc.glob, s)
			}
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, s := range []string{"", `trailing\`, "bad\xff"} {
		if _, err := Compile(s); err == nil {
			t.Errorf("Compile(%q) succeeded", s)
		}
	}
	var zero Glob
	if zero.Match("") || zero.Match("x") {
		t.Error("the zero Glob matched")
	}
}

func TestParseKinds(t *testing.T) {
	for _, tc := range []struct {
		pat, kind, name string
		want            bool
	}{
		{"github__*", KindTool, "github__x", true},
		{"github__*", KindPrompt, "github__x", true},
		{"tool:github__*", KindTool, "github__x", true},
		{"tool:github__*", KindPrompt, "github__x", false},
		{"prompt:*", KindPrompt, "anything", true},
		{"prompt:*", KindResource, "anything", false},
		{"resource:fs+*", KindResource, "fs+file:///a", true},
		{"resource:tool:x", KindResource, "tool:x", true},
		{"file:///*", KindResource, "file:///a", true},
	} {
		p, err := Parse(tc.pat)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Match(tc.kind, tc.name); got != tc.want {
			t.Errorf("Parse(%q).Match(%s, %q) = %v", tc.pat, tc.kind, tc.name, got)
		}
		if p.String() != tc.pat {
			t.Errorf("String() = %q", p.String())
		}
	}
	if _, err := Parse("tool:"); err == nil {
		t.Error(`Parse("tool:") succeeded`)
	}
}

// reference turns a glob into an anchored regexp with the documented meaning.
func reference(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	rs := []rune(glob)
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		default:
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

// FuzzGlob checks Match against a regexp built from the documented syntax.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"github__*", "github__create"}, {"a*b*c", "aXbYc"}, {"*ab", "abab"},
		{"?*?", "ab"}, {`x\*`, "x*"}, {"fs+file:///*", "fs+file:///a/b"}, {"**a**", "bab"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, name string) {
		g, err := Compile(glob)
		if err != nil {
			return
		}
		if !utf8.ValidString(name) {
			// Match compares code points; invalid bytes decode to U+FFFD,
			// as they do for regexp.
			return
		}
		if got, want := g.Match(name), reference(glob).MatchString(name); got != want {
			t.Fatalf("Compile(%q).Match(%q) = %v, reference says %v", glob, name, got, want)
		}
	})
}

func TestLiteralPrefix(t *testing.T) {
	for glob, want := range map[string]string{
		"github__*":        "github__",
		"github__create_*": "github__create_",
		"exact":            "exact",
		"*":                "",
		"*x":               "",
		"ab?cd*":           "ab",
		`a\*b*`:            "a*b",
		"fs+file:///pub/*": "fs+file:///pub/",
		"héllo*":           "héllo",
		"?":                "",
	} {
		g := MustCompile(glob)
		if got := g.LiteralPrefix(); got != want {
			t.Errorf("LiteralPrefix(%q) = %q, want %q", glob, got, want)
		}
		// Every name the glob matches begins with it.
		for _, name := range []string{want, want + "x", "x" + want, want + "/y"} {
			if g.Match(name) && !strings.HasPrefix(name, want) {
				t.Errorf("%q matches %q, which does not begin with %q", glob, name, want)
			}
		}
	}
}
