// Package rawjson reads and splices JSON text without decoding it into Go
// values, so that every byte the gateway does not have to change stays as the
// upstream wrote it: key order, unknown fields, number formatting, escapes.
package rawjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrNotObject is returned when an object was expected.
var ErrNotObject = errors.New("rawjson: not a JSON object")

// ErrNotArray is returned when an array was expected.
var ErrNotArray = errors.New("rawjson: not a JSON array")

// Field is one member of a JSON object: its decoded key and the byte span of
// its raw value in the object's text.
type Field struct {
	Key        string
	Value      []byte
	Start, End int
}

// Fields returns the top-level members of the object obj, in order.
func Fields(obj []byte) ([]Field, error) {
	var out []Field
	err := EachField(obj, func(f Field) bool { out = append(out, f); return true })
	return out, err
}

// EachField calls fn for each top-level member of obj until fn returns false.
func EachField(obj []byte, fn func(Field) bool) error {
	var bad error
	err := eachRawField(obj, func(raw []byte, at, vStart, vEnd int) bool {
		key, ok := unquote(raw)
		if !ok {
			bad = syntaxErr(at, "bad key")
			return false
		}
		return fn(Field{Key: key, Value: obj[vStart:vEnd], Start: vStart, End: vEnd})
	})
	if bad != nil {
		return bad
	}
	return err
}

// eachRawField is EachField with each key as its raw JSON string token
// (quotes and escapes included; at is its offset), for a caller that need
// not decode it.
func eachRawField(obj []byte, fn func(raw []byte, at, vStart, vEnd int) bool) error {
	noteRead(obj)
	return eachRawFieldQuiet(obj, fn)
}

// eachRawFieldQuiet is eachRawField uncounted: the inner pass of Scan,
// which counts as the one read it is part of (count_on.go).
func eachRawFieldQuiet(obj []byte, fn func(raw []byte, at, vStart, vEnd int) bool) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ErrNotObject
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return trailing(obj, i+1)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return syntaxErr(i, "expected a string key")
		}
		kEnd, err := skipString(obj, i)
		if err != nil {
			return err
		}
		raw, at := obj[i:kEnd], i
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return syntaxErr(i, "expected ':'")
		}
		vStart := skipSpace(obj, i+1)
		vEnd, err := skipValue(obj, vStart)
		if err != nil {
			return err
		}
		if !fn(raw, at, vStart, vEnd) {
			return nil
		}
		i = skipSpace(obj, vEnd)
		if i >= len(obj) {
			return syntaxErr(i, "unterminated object")
		}
		if obj[i] == '}' {
			return trailing(obj, i+1)
		}
		if obj[i] != ',' {
			return syntaxErr(i, "expected ',' or '}'")
		}
		i = skipSpace(obj, i+1)
	}
}

// Get returns the raw value of key in obj and whether it is present. When obj
// holds key more than once, Get returns the first value (encoding/json and
// most decoders keep the last one; Set and Delete act on every occurrence so
// that their output reads the same either way).
func Get(obj []byte, key string) ([]byte, bool) {
	var val []byte
	found := false
	_ = eachRawField(obj, func(raw []byte, _, vStart, vEnd int) bool {
		if keyIs(raw, key) {
			val, found = obj[vStart:vEnd], true
			return false
		}
		return true
	})
	return val, found
}

// keyIs reports whether the raw key token raw names key. A key without
// escapes is compared as it is, with nothing decoded or allocated (Get
// runs for many keys of every message); one with escapes is decoded first,
// so "\u0069d" is "id" as every decoder reads it. A key that does not
// decode names nothing, as EachField refuses it.
func keyIs(raw []byte, key string) bool {
	inner := raw[1 : len(raw)-1] // skipString returned a whole token
	if bytes.IndexByte(inner, '\\') < 0 {
		if string(inner) == key {
			return !hasControl(inner) && utf8.ValidString(key) // as unquote would have it
		}
		if isASCII(inner) {
			return false // decoding changes nothing: it is not key
		}
	}
	k, ok := unquote(raw) // escapes, or bytes that decode to U+FFFD
	return ok && k == key
}

// GetString returns the string value of key, and whether it is present and a string.
func GetString(obj []byte, key string) (string, bool) {
	raw, ok := Get(obj, key)
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	return unquote(raw)
}

// unquote decodes a JSON string token. Most keys and names have no escapes
// and are valid UTF-8: those are taken as they are, without the cost of
// encoding/json (this runs for every key of every object scanned); anything
// else goes through encoding/json, so the result is always the same.
func unquote(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		inner := raw[1 : len(raw)-1]
		if bytes.IndexByte(inner, '\\') < 0 && bytes.IndexByte(inner, '"') < 0 && utf8.Valid(inner) && !hasControl(inner) {
			if k, ok := protocolKeys[string(inner)]; ok {
				return k, true // no allocation for the keys every message has
			}
			return string(inner), true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// protocolKeys are the member names of JSON-RPC and MCP messages that the
// gateway reads on every call, so that unquote hands out these strings
// instead of allocating a copy of each key of each object it walks. It is
// never written after initialization.
var protocolKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"jsonrpc", "id", "method", "params", "result", "error", "code", "message", "data",
		"name", "arguments", "_meta", "progressToken", "cursor", "nextCursor", "uri",
		"content", "type", "text", "isError", "structuredContent", "resultType",
		"tools", "prompts", "resources", "resourceTemplates", "description", "title",
		"inputSchema", "outputSchema", "annotations", "properties", "required",
		"protocolVersion", "capabilities", "clientInfo", "serverInfo",
		"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities",
		"io.modelcontextprotocol/logLevel", "io.modelcontextprotocol/related-task",
	} {
		m[k] = k
	}
	return m
}()

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// Set returns a copy of obj with key's value replaced by value, or with the
// member appended when absent. Every other byte is kept. A key that occurs
// more than once has every occurrence's value replaced, so that decoders that
// keep the first and decoders that keep the last duplicate agree on it.
func Set(obj []byte, key string, value []byte) ([]byte, error) {
	return set(obj, key, value, false)
}

// set is Set, with value written between quotes when quoted (a plain
// string, SetString's): the output is the one allocation.
func set[V []byte | string](obj []byte, key string, value V, quoted bool) ([]byte, error) {
	var first [2]Field // on the stack: a member is almost always there once
	spans := first[:0]
	err := EachField(obj, func(f Field) bool {
		if f.Key == key {
			spans = append(spans, f)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	vlen := len(value)
	if quoted {
		vlen += 2
	}
	put := func(out []byte) []byte {
		if !quoted {
			return append(out, value...)
		}
		out = append(out, '"')
		out = append(out, value...)
		return append(out, '"')
	}
	if len(spans) > 0 {
		n := len(obj)
		for _, f := range spans {
			n += vlen - len(f.Value)
		}
		out := make([]byte, 0, n)
		prev := 0
		for _, f := range spans {
			out = append(out, obj[prev:f.Start]...)
			out = put(out)
			prev = f.End
		}
		out = append(out, obj[prev:]...)
		noteDerived(obj, out)
		return out, nil
	}
	// Append before the closing brace.
	end := len(obj) - 1
	for end >= 0 && obj[end] != '}' {
		end--
	}
	k, _ := json.Marshal(key)
	out := make([]byte, 0, len(obj)+len(k)+vlen+2)
	out = append(out, obj[:end]...)
	if hasMembers(obj[:end]) {
		out = append(out, ',')
	}
	out = append(out, k...)
	out = append(out, ':')
	out = put(out)
	out = append(out, obj[end:]...)
	noteDerived(obj, out)
	return out, nil
}

// SetString is Set with a JSON-encoded string value.
func SetString(obj []byte, key, value string) ([]byte, error) {
	if plainString(value) {
		return set(obj, key, value, true)
	}
	return Set(obj, key, quote(value))
}

// plainString reports whether value needs no escape in JSON (json.Marshal
// escapes <, > and & as HTML-safe \u escapes, and everything beyond
// ASCII is checked by it too).
func plainString(value string) bool {
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// quote is value as json.Marshal writes it, without its allocations for
// the common case of a plain name.
func quote(value string) []byte {
	if !plainString(value) {
		v, _ := json.Marshal(value)
		return v
	}
	v := make([]byte, 0, len(value)+2)
	v = append(v, '"')
	v = append(v, value...)
	return append(v, '"')
}

// Delete returns a copy of obj without key (obj itself when key is absent).
// A key that occurs more than once has every occurrence removed.
func Delete(obj []byte, key string) ([]byte, error) {
	out, found, err := deleteFirst(obj, key)
	for err == nil && found {
		obj = out
		out, found, err = deleteFirst(obj, key)
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// deleteFirst removes the first member named key, reporting whether there was one.
func deleteFirst(obj []byte, key string) ([]byte, bool, error) {
	fields, err := Fields(obj)
	if err != nil {
		return nil, false, err
	}
	for i, f := range fields {
		if f.Key != key {
			continue
		}
		// Remove from the end of the previous member (or the '{') to the
		// end of this one, which also removes the separating comma.
		var cut0, cut1 int
		if i > 0 {
			cut0, cut1 = fields[i-1].End, f.End
		} else {
			cut0 = openBrace(obj) + 1
			if len(fields) > 1 {
				cut1 = keyStart(obj, fields[1])
			} else {
				cut1 = f.End
			}
		}
		out := make([]byte, 0, len(obj))
		out = append(out, obj[:cut0]...)
		out = append(out, obj[cut1:]...)
		noteDerived(obj, out)
		return out, true, nil
	}
	return obj, false, nil
}

// Elements returns the raw elements of the array arr.
func Elements(arr []byte) ([][]byte, error) {
	noteRead(arr)
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return nil, ErrNotArray
	}
	var out [][]byte
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return out, trailing(arr, i+1)
	}
	for {
		end, err := skipValue(arr, i)
		if err != nil {
			return nil, err
		}
		out = append(out, arr[i:end])
		i = skipSpace(arr, end)
		if i >= len(arr) {
			return nil, syntaxErr(i, "unterminated array")
		}
		if arr[i] == ']' {
			return out, trailing(arr, i+1)
		}
		if arr[i] != ',' {
			return nil, syntaxErr(i, "expected ',' or ']'")
		}
		i = skipSpace(arr, i+1)
	}
}

// AppendArray appends the JSON array of elems to dst.
func AppendArray(dst []byte, elems [][]byte) []byte {
	dst = append(dst, '[')
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, ']')
}

func hasMembers(prefix []byte) bool {
	for i := len(prefix) - 1; i >= 0; i-- {
		switch prefix[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return false
		default:
			return true
		}
	}
	return false
}

func openBrace(obj []byte) int { return skipSpace(obj, 0) }

// keyStart finds where f's key begins: the '"' after the ',' that precedes it.
func keyStart(obj []byte, f Field) int {
	i := f.Start - 1
	for i >= 0 && obj[i] != ':' {
		i--
	}
	// Walk back over whitespace and the key string itself.
	i--
	for i >= 0 && isSpace(obj[i]) {
		i--
	}
	// i is at the closing quote of the key; find its opening quote.
	i--
	for i >= 0 {
		if obj[i] == '"' && !escaped(obj, i) {
			return i
		}
		i--
	}
	return 0
}

func escaped(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func trailing(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return syntaxErr(i, "unexpected data after value")
	}
	return nil
}

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("rawjson: %s at offset %d", e.msg, e.off) }

func syntaxErr(off int, msg string) error { return &syntaxError{off, msg} }

// skipString returns the index just past the string starting at b[i] == '"'.
// It checks escapes and control characters as encoding/json does, but not
// UTF-8 (which encoding/json does not reject either).
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		// Past the plain bytes: a word at a time, then byte by byte.
		j, _ = plainRun(b, j)
		for j < len(b) && plainByte[b[j]] {
			j++
		}
		if j >= len(b) {
			break
		}
		switch b[j] {
		case '\\':
			j++
			if j >= len(b) {
				return 0, syntaxErr(i, "unterminated string")
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) {
					return 0, syntaxErr(i, "unterminated string")
				}
				for _, h := range b[j+1 : j+5] {
					if !isHex(h) {
						return 0, syntaxErr(j, "bad \\u escape in string")
					}
				}
				j += 4
			default:
				return 0, syntaxErr(j, "bad escape in string")
			}
		case '"':
			return j + 1, nil
		default:
			if b[j] < 0x20 {
				return 0, syntaxErr(j, "control character in string")
			}
		}
	}
	return 0, syntaxErr(i, "unterminated string")
}

// plainRun skips the bytes of a string that stand for themselves, eight at
// a time: it returns the index of the first quote, backslash or control
// character at or after j in the last eight-byte word it looked at (or
// after, up to len(b), when fewer than eight bytes are left: those are for
// the caller's own byte loop), and whether any byte it passed was not ASCII.
// A 1 MiB text is skipped in an eighth of the steps of a byte loop.
func plainRun(b []byte, j int) (int, bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	var passed uint64
	for ; j+8 <= len(b); j += 8 {
		x := binary.LittleEndian.Uint64(b[j:])
		q, bs := x^(ones*'"'), x^(ones*'\\')
		// Each term has a high bit set exactly when some byte is below
		// 0x20, or is zero after the xor (a quote, a backslash).
		if ((x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs)&highs != 0 {
			break
		}
		passed |= x
	}
	return j, passed&highs != 0
}

// validScalar reports whether s is exactly one JSON literal or number, as
// json.Valid would (without its scanner: this runs for every number and
// literal a skip passes).
func validScalar(s []byte) bool {
	switch string(s) {
	case "true", "false", "null":
		return true
	}
	return IsNumber(s)
}

// IsNumber reports whether s is exactly one JSON number (RFC 8259 §6).
func IsNumber(s []byte) bool {
	j := 0
	if j < len(s) && s[j] == '-' {
		j++
	}
	digits := func() bool {
		k := j
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		return j > k
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case j < len(s) && '1' <= s[j] && s[j] <= '9':
		digits()
	default:
		return false
	}
	if j < len(s) && s[j] == '.' {
		j++
		if !digits() {
			return false
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if !digits() {
			return false
		}
	}
	return j == len(s)
}

// maxNesting is json.Valid's nesting limit, so that skipValue accepts
// exactly what it did when it called json.Valid.
const maxNesting = 10000

// skipNested skips and validates the object or array at b[i], depth levels
// deep. Its errors other than a string's say only that the value is bad:
// skipValue reports them at the value's start, as before.
func skipNested(b []byte, i, depth int) (int, error) {
	if depth > maxNesting {
		return 0, errBadValue
	}
	closing := byte(']')
	if b[i] == '{' {
		closing = '}'
	}
	j := skipSpace(b, i+1)
	if j < len(b) && b[j] == closing {
		return j + 1, nil
	}
	for {
		if closing == '}' {
			if j >= len(b) || b[j] != '"' {
				return 0, errBadValue
			}
			end, err := skipString(b, j)
			if err != nil {
				return 0, err
			}
			j = skipSpace(b, end)
			if j >= len(b) || b[j] != ':' {
				return 0, errBadValue
			}
			j = skipSpace(b, j+1)
		}
		if j >= len(b) {
			return 0, errBadValue
		}
		var end int
		var err error
		switch c := b[j]; {
		case c == '"':
			end, err = skipString(b, j)
		case c == '{' || c == '[':
			end, err = skipNested(b, j, depth+1)
		default:
			end = j
			for end < len(b) && !isSpace(b[end]) && b[end] != ',' && b[end] != '}' && b[end] != ']' {
				end++
			}
			if !validScalar(b[j:end]) {
				err = errBadValue
			}
		}
		if err != nil {
			return 0, err
		}
		j = skipSpace(b, end)
		if j >= len(b) {
			return 0, errBadValue
		}
		switch b[j] {
		case closing:
			return j + 1, nil
		case ',':
			j = skipSpace(b, j+1)
		default:
			return 0, errBadValue
		}
	}
}

// errBadValue is skipNested's refusal of anything but a string's content.
var errBadValue = errors.New("rawjson: invalid JSON value")

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipValue returns the index just past the JSON value starting at b[i]. The
// value is checked to be valid JSON (except for UTF-8, as with json.Valid).
// An object or array is skipped and validated in the same pass (strings by
// skipString, whose checks are json.Valid's), not scanned and then handed
// to json.Valid: a 1 MiB result is read once per skip, not twice, and at
// skipString's speed rather than encoding/json's state machine's.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, syntaxErr(i, "expected a value")
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		end, err := skipNested(b, i, 1)
		if err == errBadValue {
			return 0, syntaxErr(i, "invalid JSON value")
		}
		return end, err
	default:
		j := i
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		if !validScalar(b[i:j]) {
			return 0, syntaxErr(i, "invalid literal")
		}
		return j, nil
	}
}
