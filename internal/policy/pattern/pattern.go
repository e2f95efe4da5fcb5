// Package pattern parses the name patterns of policy rules. It is a leaf
// package so that internal/config can validate patterns at load time (and
// report a bad one with its line number) while internal/policy compiles them.
//
// A pattern is an optional kind prefix and a glob:
//
//	github__*                 tools, prompts and resources whose name matches
//	tool:github__delete_*     tools only
//	prompt:*                  prompts only
//	resource:fs+file:///pub/* resources and resource templates only
//
// Glob syntax, over the whole namespaced name or URI, case-sensitive:
//
//   - any run of characters, including none, "/", "__" and "+": it never
//     stops at a separator, so "fs+file:///data/*" covers every file
//     under /data, at any depth ("**" means the same as "*")
//     ?    exactly one character (a Unicode code point)
//     \c   the character c literally (to match a literal *, ? or \)
//
// Everything else matches itself. There are no character classes. An
// unprefixed pattern whose text begins with "tool:", "prompt:" or
// "resource:" would be read as prefixed: write "resource:tool:..." to match
// a resource URI with the scheme "tool".
package pattern

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Kinds a pattern can be restricted to.
const (
	KindAny      = ""
	KindTool     = "tool"
	KindPrompt   = "prompt"
	KindResource = "resource"
)

// Kinds lists the kind prefixes, for messages.
var Kinds = []string{KindTool, KindPrompt, KindResource}

// Pattern is a compiled pattern. The zero value matches nothing.
type Pattern struct {
	// Text is the pattern as written, prefix included.
	Text string
	// Kind restricts the pattern to one kind; KindAny matches every kind.
	Kind string
	glob Glob
}

// Parse compiles a pattern with an optional kind prefix.
func Parse(s string) (Pattern, error) {
	kind, rest := SplitKind(s)
	g, err := Compile(rest)
	if err != nil {
		return Pattern{}, err
	}
	return Pattern{Text: s, Kind: kind, glob: g}, nil
}

// SplitKind separates a kind prefix ("tool:", "prompt:", "resource:") from
// the glob. Without one the kind is KindAny.
func SplitKind(s string) (kind, glob string) {
	for _, k := range Kinds {
		if rest, ok := strings.CutPrefix(s, k+":"); ok {
			return k, rest
		}
	}
	return KindAny, s
}

// Match reports whether the pattern covers a name of the given kind.
func (p Pattern) Match(kind, name string) bool {
	if p.Kind != KindAny && p.Kind != kind {
		return false
	}
	return p.glob.Match(name)
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.Text }

// Glob is a compiled glob (no kind prefix).
type Glob struct {
	// segs are the runs between stars (literals and "?"), each noting
	// whether a star precedes it; trailing reports a star after the last.
	segs     []seg
	trailing bool
	valid    bool
	// prefix is the literal text every match begins with (up to the first
	// star or "?"): a cheap first test, and what policy indexes rules by.
	prefix string
}

// seg is a literal run (with single-character wildcards) preceded by a star
// when star is true.
type seg struct {
	star bool
	text []rune
	any  []bool // any[i]: text[i] is a "?"
}

// ErrEmpty is returned for an empty glob.
var ErrEmpty = errors.New("the pattern is empty")

// Compile compiles a glob.
func Compile(s string) (Glob, error) {
	if s == "" {
		return Glob{}, ErrEmpty
	}
	if !utf8.ValidString(s) {
		return Glob{}, errors.New("the pattern is not valid UTF-8")
	}
	g := Glob{valid: true}
	cur := seg{}
	pendingStar := false
	flush := func() {
		if len(cur.text) > 0 {
			cur.star = pendingStar
			g.segs = append(g.segs, cur)
			pendingStar = false
		}
		cur = seg{}
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; r {
		case '*':
			flush()
			pendingStar = true
		case '?':
			cur.text = append(cur.text, '?')
			cur.any = append(cur.any, true)
		case '\\':
			if i+1 == len(rs) {
				return Glob{}, fmt.Errorf("%q ends in a lone \\ (which escapes the next character)", s)
			}
			i++
			cur.text = append(cur.text, rs[i])
			cur.any = append(cur.any, false)
		default:
			cur.text = append(cur.text, r)
			cur.any = append(cur.any, false)
		}
	}
	flush()
	g.trailing = pendingStar
	if len(g.segs) > 0 && !g.segs[0].star {
		var lit []rune
		for j, r := range g.segs[0].text {
			if g.segs[0].any[j] {
				break
			}
			lit = append(lit, r)
		}
		g.prefix = string(lit)
	}
	return g, nil
}

// LiteralPrefix is the literal text every name the glob matches begins
// with ("github__" for "github__*"; "" for "*x").
func (g Glob) LiteralPrefix() string { return g.prefix }

// LiteralPrefix is the glob's literal prefix (the kind prefix aside).
func (p Pattern) LiteralPrefix() string { return p.glob.prefix }

// MustCompile is Compile for patterns known to be valid; it panics otherwise.
func MustCompile(s string) Glob {
	g, err := Compile(s)
	if err != nil {
		panic(err)
	}
	return g
}

// Match reports whether the glob matches all of name.
func (g Glob) Match(name string) bool {
	if !g.valid || !strings.HasPrefix(name, g.prefix) {
		return false
	}
	rs := []rune(name)
	pos := 0
	for i, sg := range g.segs {
		last := i == len(g.segs)-1
		switch {
		case !sg.star:
			// Anchored at pos.
			if !sg.matchAt(rs, pos) {
				return false
			}
			pos += len(sg.text)
		case last && !g.trailing:
			// The last literal run after a star must end the name; taking
			// the rightmost place is always right.
			at := len(rs) - len(sg.text)
			if at < pos || !sg.matchAt(rs, at) {
				return false
			}
			pos = len(rs)
		default:
			// Leftmost match after a star: greedy-left is optimal when
			// stars separate the runs (each later run can only gain room).
			found := false
			for at := pos; at+len(sg.text) <= len(rs); at++ {
				if sg.matchAt(rs, at) {
					pos, found = at+len(sg.text), true
					break
				}
			}
			if !found {
				return false
			}
		}
	}
	return g.trailing || pos == len(rs)
}

func (sg seg) matchAt(rs []rune, at int) bool {
	if at+len(sg.text) > len(rs) {
		return false
	}
	for j, r := range sg.text {
		if !sg.any[j] && rs[at+j] != r {
			return false
		}
	}
	return true
}

// What a glob can say of every name that begins with a prefix (an
// upstream's namespace, "github__"): whether it may match one of them, and
// whether it matches all of them. Both answer for the glob's shape alone,
// erring toward "may" and away from "all", so a caller that hides what no
// pattern may match never hides what one could.

// MayMatchPrefixed reports whether the glob may match some name that
// begins with prefix: false only when none can.
func (g Glob) MayMatchPrefixed(prefix string) bool {
	if !g.valid {
		return false
	}
	if len(g.segs) == 0 || g.segs[0].star {
		return true // "*", or runs after a star: the prefix can precede them
	}
	first := g.segs[0]
	ps := []rune(prefix)
	n := min(len(first.text), len(ps))
	for j := 0; j < n; j++ {
		if !first.any[j] && first.text[j] != ps[j] {
			return false
		}
	}
	if len(first.text) >= len(ps) {
		return true
	}
	// The first run ends inside the prefix: more must follow it.
	return g.trailing || len(g.segs) > 1
}

// MatchesAllPrefixed reports whether the glob matches every name that
// begins with prefix: a run covering the start of prefix and then a star
// ("git*", "github__*", "*"), or a sole star.
func (g Glob) MatchesAllPrefixed(prefix string) bool {
	if !g.valid || !g.trailing {
		return false
	}
	if len(g.segs) == 0 {
		return true
	}
	if len(g.segs) > 1 || g.segs[0].star {
		return false
	}
	return g.segs[0].matchAt([]rune(prefix), 0)
}

// MayMatchPrefixed is the glob's MayMatchPrefixed for a name of kind.
func (p Pattern) MayMatchPrefixed(kind, prefix string) bool {
	return (p.Kind == KindAny || p.Kind == kind) && p.glob.MayMatchPrefixed(prefix)
}

// MatchesAllPrefixed is the glob's MatchesAllPrefixed for names of kind.
func (p Pattern) MatchesAllPrefixed(kind, prefix string) bool {
	return (p.Kind == KindAny || p.Kind == kind) && p.glob.MatchesAllPrefixed(prefix)
}
