package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Tool curation (routes[].tools.curate, upstreams.*.curate; docs/curation.md):
// what a route shows of a tool — its name, title, description, annotations
// and parameters — as the administrator chose, and what its calls carry.

// ToolCuration is one curation rule, for the tools its Tool pattern matches.
type ToolCuration struct {
	// Tool is the tool's name or a glob of names (* and ?): on a route, as
	// the route names it (demo__echo on a prefixed route); on an upstream,
	// the upstream's own name.
	Tool string `yaml:"tool"`
	// Rename is the name lists show and callers use instead (an exact Tool
	// only); the old name is refused as unknown.
	Rename string `yaml:"rename"`
	// Title and Description edit the tool's title and description.
	Title       *TextEdit `yaml:"title"`
	Description *TextEdit `yaml:"description"`
	// Annotations override the tool's annotation hints (readOnlyHint,
	// destructiveHint, idempotentHint, openWorldHint).
	Annotations map[string]bool `yaml:"annotations"`
	// Parameters curate the tool's arguments, by parameter name.
	Parameters map[string]*ParamCuration `yaml:"parameters"`
}

// TextEdit replaces a text, or adds to its start or end.
type TextEdit struct {
	// Replace is the new text (unset: the upstream's).
	Replace string `yaml:"replace"`
	// Prepend and Append are added before and after it.
	Prepend string `yaml:"prepend"`
	Append  string `yaml:"append"`
}

// ParamCuration is what the gateway does with one parameter.
type ParamCuration struct {
	// Fixed is set on every call and removed from the listed schema; a
	// caller sending the parameter is refused.
	Fixed *CurateValue `yaml:"fixed"`
	// Default is filled when the caller sends none, and shown in the
	// listed schema.
	Default *CurateValue `yaml:"default"`
	// Hide removes the parameter from the listed schema; a caller sending
	// it is refused.
	Hide bool `yaml:"hide"`
	// Describe replaces the parameter's description in the listed schema.
	Describe string `yaml:"describe"`
}

// CurateValue is a parameter's value, as JSON. A string may name the
// caller's principal: ${principal.subject}, ${principal.claims.NAME}.
type CurateValue struct {
	JSON json.RawMessage
}

// UnmarshalYAML reads any YAML value as its JSON.
func (c *CurateValue) UnmarshalYAML(n *yaml.Node) error {
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("not a JSON value: %v", err)
	}
	c.JSON = b
	return nil
}

// MarshalYAML shows the value as the YAML it was read from.
func (c CurateValue) MarshalYAML() (any, error) {
	var v any
	if err := json.Unmarshal(c.JSON, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// PrincipalRef reports whether the value names the caller's principal.
func (c *CurateValue) PrincipalRef() bool {
	return c != nil && strings.Contains(string(c.JSON), "${principal.")
}

// MatchGlob reports whether name matches pattern, where * is any run of
// characters and ? any one.
func MatchGlob(pattern, name string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == name
	}
	px, nx := 0, 0
	nextPx, nextNx := 0, 0
	for px < len(pattern) || nx < len(name) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				nextPx, nextNx = px, nx+1
				px++
				continue
			case '?':
				if nx < len(name) {
					px++
					nx++
					continue
				}
			default:
				if nx < len(name) && name[nx] == c {
					px++
					nx++
					continue
				}
			}
		}
		if 0 < nextNx && nextNx <= len(name) {
			px, nx = nextPx, nextNx
			continue
		}
		return false
	}
	return true
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?") }

// curation checks one list of curation rules (p: its path). names are the
// prefixes a route's tool names start with ("" anything: unprefixed or an
// upstream's own names); expose the route's expose patterns.
func (v *validator) curation(p string, rules []*ToolCuration, prefixes []string, expose []string) {
	renamed := map[string]string{}
	for i, r := range rules {
		rp := fmt.Sprintf("%s[%d]", p, i)
		if r == nil || r.Tool == "" {
			v.add(rp+".tool", "is required: the tool's name or a glob of names (e.g. github__create_issue or github__*)")
			continue
		}
		lit, _, _ := strings.Cut(strings.ReplaceAll(r.Tool, "?", "*"), "*")
		if len(prefixes) > 0 && !slices.ContainsFunc(prefixes, func(pre string) bool {
			return strings.HasPrefix(lit, pre) || (isGlob(r.Tool) && strings.HasPrefix(pre, lit))
		}) {
			v.add(rp+".tool", fmt.Sprintf("%q can match no tool on this route: its tools are named %s<tool>; write the route's name for the tool", r.Tool, strings.Join(prefixes, "<tool> or ")))
		}
		if len(expose) > 0 && !isGlob(r.Tool) && !slices.ContainsFunc(expose, func(e string) bool { return MatchGlob(e, r.Tool) }) {
			v.add(rp+".tool", fmt.Sprintf("%q is not exposed on this route (tools.expose), so its curation would never show; expose it or remove the rule", r.Tool))
		}
		if r.Rename != "" {
			switch {
			case isGlob(r.Tool):
				v.add(rp+".rename", fmt.Sprintf("renames one tool, but %q is a glob; name the tool exactly", r.Tool))
			case isGlob(r.Rename) || strings.TrimSpace(r.Rename) != r.Rename:
				v.add(rp+".rename", fmt.Sprintf("%q is not a tool name", r.Rename))
			case renamed[r.Rename] != "":
				v.add(rp+".rename", fmt.Sprintf("%q is already the new name of %q; give each tool its own name", r.Rename, renamed[r.Rename]))
			default:
				renamed[r.Rename] = r.Tool
			}
		}
		for k := range r.Annotations {
			if !slices.Contains([]string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}, k) {
				v.add(rp+".annotations."+k, "is not a tool annotation hint; use readOnlyHint, destructiveHint, idempotentHint or openWorldHint")
			}
		}
		params := make([]string, 0, len(r.Parameters))
		for name := range r.Parameters {
			params = append(params, name)
		}
		sort.Strings(params)
		for _, name := range params {
			pc, pp := r.Parameters[name], rp+".parameters."+name
			if pc == nil {
				v.add(pp, "is empty; set fixed, default, hide or describe")
				continue
			}
			n := 0
			for _, b := range []bool{pc.Fixed != nil, pc.Default != nil, pc.Hide} {
				if b {
					n++
				}
			}
			if n > 1 {
				v.add(pp, "sets more than one of fixed, default and hide; a parameter is fixed (the gateway sets it), defaulted (the caller may set it) or hidden")
			}
			if (pc.Fixed != nil || pc.Hide) && pc.Describe != "" {
				v.add(pp+".describe", "describes a parameter the listed schema does not show (fixed or hidden); remove describe")
			}
		}
	}
	// A rename onto a name another rule curates as a tool of its own.
	for _, r := range rules {
		if r == nil || isGlob(r.Tool) {
			continue
		}
		if other, ok := renamed[r.Tool]; ok && other != r.Tool && r.Rename == "" {
			v.add(p, fmt.Sprintf("%q is renamed to %q, which is also the name of a tool curated here; pick another name", other, r.Tool))
		}
	}
}
