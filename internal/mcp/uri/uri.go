// Package uri brings a resource URI to the one form the gateway judges
// (DESIGN invariant 9). Policy globs, audit and pinning read a URI as a
// string, but upstream libraries read it as a URL: the TypeScript SDK's
// WHATWG parser drops "." and ".." segments (also "%2e"/"%2E" spellings),
// tabs and newlines, and lowercases the scheme; filesystem-backed servers
// collapse "//". A URI whose string differs from what the upstream runs
// would let "allow .../document/*" with "deny .../instructions.md" be
// passed by ".../document/x/../instructions.md".
//
// Canonical computes the RFC 3986 §6.2.2 normal form: scheme and host in
// lower case, percent-encoded unreserved characters decoded, the hex of
// other percent-encodings in upper case, non-ASCII characters and ASCII
// ones RFC 3986 does not allow percent-encoded (as UTF-8), dot-segments
// removed (§5.2.4), the default port of http, https, ws and wss dropped,
// the empty path of a special scheme made "/". Where no form can be given
// safely it refuses: an encoded slash or backslash ("%2F", "%5C") inside
// a path segment (decoding it would change the segments, keeping it lets
// a server that decodes first see different ones), a backslash before the
// query (special schemes read it as "/"), control characters and spaces
// (the WHATWG parser strips some of them), an empty segment inside the
// path, a fragment (WHATWG parsers keep it, others drop it), dot-segments
// in a path that does not start with "/" (an opaque URI, which a WHATWG
// parser leaves alone and others may not), malformed percent-encoding and
// a non-ASCII host. A query is kept as sent, escapes normalized.
//
// The gateway refuses a request whose URI is not canonical rather than
// rewriting it (internal/catalog PinTarget), so that the bytes forwarded
// stay the client's (invariant 1) and the error names the form to send.
package uri

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Error is why a URI is not canonical. Canonical is the form to send
// instead, "" when there is none the gateway can vouch for.
type Error struct {
	Problem   string
	Canonical string
}

func (e *Error) Error() string {
	if e.Canonical != "" {
		return fmt.Sprintf("%s: send %s", e.Problem, e.Canonical)
	}
	return e.Problem
}

// Canonical returns the canonical form of s, which equals s when s is
// canonical. The error is an *Error: either s has no canonical form (no
// Canonical), or the returned string is that form (Canonical set too).
func Canonical(s string) (string, error) {
	if p := refused(s); p != "" {
		return "", &Error{Problem: p}
	}
	rest := s
	scheme, hasScheme := schemeOf(s)
	var b strings.Builder
	b.Grow(len(s))
	if hasScheme {
		b.WriteString(strings.ToLower(scheme))
		b.WriteByte(':')
		rest = s[len(scheme)+1:]
	}
	hasAuthority := strings.HasPrefix(rest, "//")
	if hasAuthority {
		rest = rest[2:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		auth, err := authority(rest[:end], strings.ToLower(scheme))
		if err != "" {
			return "", &Error{Problem: err}
		}
		b.WriteString("//")
		b.WriteString(auth)
		rest = rest[end:]
	}
	end := strings.IndexAny(rest, "?#")
	if end < 0 {
		end = len(rest)
	}
	path, perr := normalizeEncoding(rest[:end], inPath)
	if perr != "" {
		return "", &Error{Problem: perr}
	}
	path, perr = dotSegments(path, hasAuthority || strings.HasPrefix(path, "/"))
	if perr != "" {
		return "", &Error{Problem: perr}
	}
	if path == "" && hasAuthority && specialSchemes[strings.ToLower(scheme)] {
		path = "/" // RFC 3986 §6.2.3; a WHATWG parser adds it too
	}
	b.WriteString(path)
	tail, terr := normalizeEncoding(rest[end:], inQuery)
	if terr != "" {
		return "", &Error{Problem: terr}
	}
	b.WriteString(tail)
	c := b.String()
	if _, ok := schemeOf(c); ok && !hasScheme {
		// "%41:x" decodes to "A:x", which would read as a scheme.
		return "", &Error{Problem: "resource URI has no scheme but its decoded form starts with one; send an absolute URI"}
	}
	if c != s {
		return c, &Error{Problem: "resource URI is not in canonical form", Canonical: c}
	}
	return s, nil
}

// refused names what no canonical form can be given for anywhere in s.
func refused(s string) string {
	if strings.Contains(s, "#") {
		return "resource URI has a fragment (#...), which names a part of a resource on the client's side and which some upstreams drop and others keep; send it without"
	}
	q := strings.IndexByte(s, '?')
	if q < 0 {
		q = len(s)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f:
			return "resource URI contains a control character or space (upstream URL parsers drop or split at them); percent-encode it"
		case c == '\\' && i < q:
			return `resource URI contains a backslash before its query, which some upstreams read as "/"; send "/" instead`
		}
	}
	return ""
}

// schemeOf returns the scheme of s (RFC 3986 §3.1) when s has one.
func schemeOf(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlpha(c):
		case i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return s[:i], true
		default:
			return "", false
		}
	}
	return "", false
}

// specialSchemes are the WHATWG URL standard's special schemes, whose
// empty path reads as "/".
var specialSchemes = map[string]bool{"http": true, "https": true, "ws": true, "wss": true, "ftp": true, "file": true}

// defaultPorts are the ports a WHATWG parser drops for special schemes.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}

// authority normalizes userinfo@host:port: the host in lower case, its
// percent-encodings normalized, a default or empty port dropped.
func authority(a, scheme string) (string, string) {
	userinfo, hostport := "", a
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		userinfo, hostport = a[:i+1], a[i+1:]
	}
	host, port := hostport, ""
	// A host holds ":" only inside brackets (an IP literal).
	from := 0
	if strings.HasPrefix(hostport, "[") {
		from = strings.IndexByte(hostport, ']') + 1
		if from == 0 {
			return "", "resource URI has a malformed IP literal host (no closing ])"
		}
	}
	if i := strings.IndexByte(hostport[from:], ':'); i >= 0 {
		i += from
		host, port = hostport[:i], hostport[i+1:]
		for j := 0; j < len(port); j++ {
			if !isDigit(port[j]) {
				return "", "resource URI has a malformed port"
			}
		}
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			return "", "resource URI has a non-ASCII host; send it in its ASCII (punycode) form"
		}
	}
	ui, err := normalizeEncoding(userinfo, inAuthority)
	if err != "" {
		return "", err
	}
	h, err := normalizeEncoding(host, inAuthority)
	if err != "" {
		return "", err
	}
	out := ui + strings.ToLower(h)
	if port != "" && port != defaultPorts[scheme] {
		out += ":" + port
	}
	return out, ""
}

// Where normalizeEncoding works.
const (
	inAuthority = iota
	inPath
	inQuery
)

// normalizeEncoding decodes percent-encoded unreserved characters, writes
// the hex of the others in upper case and percent-encodes non-ASCII bytes.
// In a path or query it percent-encodes the ASCII characters RFC 3986
// does not allow there (" < > [ ] ^ ` { | } and, in a query, \): a WHATWG
// parser encodes some of them itself ("{" reads as "%7B"), so the raw and
// the encoded spelling would be two strings for one resource. In a path
// an encoded "/" or "\" is refused: it cannot be brought to one form
// without changing the segments.
func normalizeEncoding(s string, where int) (string, string) {
	if !strings.ContainsRune(s, '%') && clean(s, where) {
		return s, ""
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", "resource URI has a malformed percent-encoding (a % not followed by two hex digits); send % as %25"
			}
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if where == inPath && (d == '/' || d == '\\') {
				return "", "resource URI has an encoded slash or backslash (%2F, %5C) in its path, which upstreams read differently; the gateway refuses it"
			}
			if unreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteByte('%')
				b.WriteByte(upper(s[i+1]))
				b.WriteByte(upper(s[i+2]))
			}
			i += 2
		case c >= utf8.RuneSelf || where != inAuthority && !allowed(c):
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

// dotSegments removes "." and ".." segments from a hierarchical path
// (RFC 3986 §5.2.4) and refuses an empty segment inside it; in a path that
// is not hierarchical, where no removal is defined, it refuses them.
func dotSegments(path string, hierarchical bool) (string, string) {
	// A scan first: the common path has neither, and is returned without
	// allocating.
	dots, empty := false, false
	for i, start := 0, 0; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		switch seg := path[start:i]; {
		case seg == "." || seg == "..":
			dots = true
		case seg == "" && start > 0 && i < len(path):
			empty = true
		}
		start = i + 1
	}
	if empty {
		return "", "resource URI has an empty path segment (//), which upstreams read differently; send the URI without it"
	}
	if !dots {
		return path, ""
	}
	if !hierarchical {
		return "", `resource URI has "." or ".." segments in a path that does not start with "/", which has no canonical form; send the URI without them`
	}
	// path starts with "/" (or is empty): segs[0] == "".
	segs := strings.Split(path, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs[1:] {
		last := i == len(segs)-2
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/"), ""
}

// clean reports whether s holds no byte normalizeEncoding would encode.
func clean(s string, where int) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || where != inAuthority && !allowed(c) {
			return false
		}
	}
	return true
}

// allowed reports whether c may appear as it is in a path or query
// (RFC 3986 pchar, "/" and "?", and "%" of an escape).
func allowed(c byte) bool {
	return unreserved(c) || strings.IndexByte("%:@/?!$&'()*+,;=", c) >= 0
}

func unreserved(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'f' {
		return c - 'a' + 'A'
	}
	return c
}
