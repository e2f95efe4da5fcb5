package intercept

import (
	"errors"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// errSyntax is a member that is not JSON the walker can read; the caller
// refuses it (fail closed) rather than pass what it could not judge.
var errSyntax = errors.New("it is not JSON an interceptor can read (malformed, or nested over 10000 levels), so it was not passed unjudged")

// editor rewrites JSON string values of src, one token at a time: each
// value is decoded, handed to fn, and re-encoded only when fn changed it.
// Every other byte is copied as it was (DESIGN invariant 1). The output is
// made on the first change: a member nothing changes costs no copy.
type editor struct {
	src []byte
	out []byte // nil until the first edit
	at  int    // src[:at] is in out already
	buf []byte // decoding scratch, reused across tokens
	// tok and tokEnd are the current token's quotes' offsets.
	tok, tokEnd int
}

// strFunc judges one decoded string value. To change it, it writes the
// new value with open, text and close (so a long value is written once,
// into the output, with no copy of its own), and returns true.
type strFunc func(s []byte) bool

// walk hands fn every string value (not object keys) in src[from:to]. It
// does not recurse, so depth costs nothing but the bytes.
func (e *editor) walk(from, to int, fn strFunc) error {
	src := e.src
	for i := from; i < to; i++ {
		if src[i] != '"' {
			continue
		}
		end, esc, ok := stringEnd(src, i+1, to)
		if !ok {
			return errSyntax
		}
		if isKey(src, end+1, to) {
			i = end
			continue
		}
		raw := src[i+1 : end]
		s := raw
		if esc {
			e.buf = rawjson.AppendUnquoted(e.buf[:0], raw)
			s = e.buf
		}
		e.tok, e.tokEnd = i, end
		fn(s)
		i = end
	}
	return nil
}

// open starts replacing the current token: what precedes it is copied,
// and the new string's opening quote written.
func (e *editor) open() {
	if e.out == nil {
		e.out = make([]byte, 0, len(e.src)+64)
	}
	e.out = append(e.out, e.src[e.at:e.tok]...)
	e.out = append(e.out, '"')
}

// text writes part of the new string's text, escaped.
func (e *editor) text(b []byte) { e.out = appendEscaped(e.out, b) }

// close ends the new string; the old token is skipped.
func (e *editor) close() {
	e.out = append(e.out, '"')
	e.at = e.tokEnd + 1
}

// result is src with its edits; changed is false when none was made.
func (e *editor) result() (out []byte, changed bool) {
	if e.out == nil {
		return e.src, false
	}
	return append(e.out, e.src[e.at:]...), true
}

// stringEnd finds the closing quote of the string whose text starts at
// i, and whether it has escapes.
func stringEnd(src []byte, i, to int) (end int, esc, ok bool) {
	for ; i < to; i++ {
		switch src[i] {
		case '\\':
			esc = true
			i++
		case '"':
			return i, esc, true
		}
	}
	return 0, false, false
}

// isKey reports whether the token ending before i is an object key (a
// colon follows it).
func isKey(src []byte, i, to int) bool {
	for ; i < to; i++ {
		switch src[i] {
		case ' ', '\t', '\n', '\r':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// appendEscaped appends s as the text of a JSON string; it escapes what
// JSON requires and nothing more (no HTML escaping: the text stays
// readable).
func appendEscaped(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			case b < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			default:
				dst = append(dst, b)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}
