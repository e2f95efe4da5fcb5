package catalog

import (
	"regexp"
	"strings"
)

// Resource naming on prefixed routes (docs/protocol.md, "Naming").
//
// An upstream's URI is shown exactly as the upstream wrote it whenever
// reading that string back on the route reaches that upstream (the common
// case: the URI is unique on the route). Otherwise it is shown in its
// explicit form, which names the upstream as the first member of the
// query and leaves scheme, authority, path and fragment as they were:
//
//	ui://app/x.html          → ui://app/x.html?mcpgw=basic
//	https://h/p?a=1#top      → https://h/p?mcpgw=basic&a=1#top
//
// The explicit form parses as the same scheme (a query is part of every
// URI's generic syntax, and of WHATWG URLs), and it is reversible: the
// upstream name cannot contain '&', '#' or '?' (config validation), so
// parseExplicit undoes explicitURI exactly, for any string.

// explicitKey introduces the upstream in an explicit URI's query.
const explicitKey = "mcpgw="

// explicitURI is the explicit form of an upstream's URI.
func explicitURI(upstream, uri string) string {
	frag := strings.IndexByte(uri, '#')
	if frag < 0 {
		frag = len(uri)
	}
	if q := strings.IndexByte(uri[:frag], '?'); q >= 0 {
		return uri[:q+1] + explicitKey + upstream + "&" + uri[q+1:]
	}
	return uri[:frag] + "?" + explicitKey + upstream + uri[frag:]
}

// parseExplicit undoes explicitURI: it returns the upstream named and the
// upstream's own URI, and whether s is an explicit form at all. Whether
// the upstream is on the route is for the caller to check.
func parseExplicit(s string) (upstream, uri string, ok bool) {
	frag := strings.IndexByte(s, '#')
	if frag < 0 {
		frag = len(s)
	}
	q := strings.IndexByte(s[:frag], '?')
	if q < 0 || !strings.HasPrefix(s[q+1:frag], explicitKey) {
		return "", "", false
	}
	rest := s[q+1+len(explicitKey) : frag]
	if amp := strings.IndexByte(rest, '&'); amp >= 0 {
		// The URI had a query of its own: what follows the '&'.
		upstream = rest[:amp]
		uri = s[:q+1] + rest[amp+1:] + s[frag:]
	} else {
		upstream = rest
		uri = s[:q] + s[frag:]
	}
	if upstream == "" {
		return "", "", false
	}
	return upstream, uri, true
}

// explicitTemplate is the explicit form of an RFC 6570 URI template: the
// template whose expansions are the explicit forms of the original's
// expansions. It is explicitURI of the template text, except where the
// query or the fragment starts with an expression: "{?x,y}" becomes
// "?mcpgw=up{&x,y}" (the upstream first, then the variables), and the
// upstream goes before a "{#x}". (A "{+x}" before the query that expands
// to a '?' or '#' moves the query: such a read is routed by the template
// match instead, see View.resolveURI.)
func explicitTemplate(upstream, tpl string) string {
	marker := explicitKey + upstream
	frag := strings.IndexByte(tpl, '#')
	if frag < 0 {
		frag = len(tpl)
	}
	if q := strings.IndexByte(tpl[:frag], '?'); q >= 0 {
		if q > 0 && tpl[q-1] == '{' {
			return tpl[:q-1] + "?" + marker + "{&" + tpl[q+1:]
		}
		return tpl[:q+1] + marker + "&" + tpl[q+1:]
	}
	if frag < len(tpl) && frag > 0 && tpl[frag-1] == '{' {
		frag--
	}
	return tpl[:frag] + "?" + marker + tpl[frag:]
}

// maxTemplateBytes bounds the templates the gateway compiles for matching:
// a longer one is kept for naming but never matched.
const maxTemplateBytes = 4096

// compileTemplate returns a matcher for the URIs an RFC 6570 template can
// expand to. It is loose inside expressions (any characters an expansion
// of that operator could produce, not the variables' own constraints) and
// exact in literals, which is what routing a read needs: it must not miss
// the upstream that serves a URI. It returns nil for a template it cannot
// read (unterminated or reserved-operator expressions, or too long).
func compileTemplate(tpl string) *regexp.Regexp {
	if len(tpl) > maxTemplateBytes {
		return nil
	}
	var b strings.Builder
	b.WriteString(`^`)
	for i := 0; i < len(tpl); {
		open := strings.IndexByte(tpl[i:], '{')
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(tpl[i:]))
			break
		}
		b.WriteString(regexp.QuoteMeta(tpl[i : i+open]))
		i += open
		end := strings.IndexByte(tpl[i:], '}')
		if end < 0 {
			return nil
		}
		expr := tpl[i+1 : i+end]
		i += end + 1
		if expr == "" {
			return nil
		}
		switch expr[0] {
		case '+':
			b.WriteString(`.*`)
		case '#':
			b.WriteString(`(?:#.*)?`)
		case '.':
			b.WriteString(`(?:\.[^/?#]*)*`)
		case '/':
			b.WriteString(`(?:/[^/?#]*)*`)
		case ';':
			b.WriteString(`(?:;[^/?#]*)*`)
		case '?':
			b.WriteString(`(?:\?[^#]*)?`)
		case '&':
			b.WriteString(`(?:&[^#]*)*`)
		case '=', ',', '!', '@', '|':
			return nil // reserved for future extensions (RFC 6570 §2.2)
		default:
			b.WriteString(`[^/?#]*`)
		}
	}
	b.WriteString(`$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil
	}
	return re
}
