package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// parseArguments decodes a call's arguments for conditions: nil for none
// (absent or JSON null). It refuses what conditions must not guess about:
// anything but an object, a key twice in one object (decoders that keep
// the first and the last duplicate would see different calls), nesting
// deeper than maxJSONDepth, and numbers beyond float64. Numbers are
// float64, as CEL reads JSON.
//
// members are the member paths conditions select (argumentMembers): a
// case variant of one is refused too, as a case-insensitive tool would
// read it for the member the condition judged (nil: none).
func parseArguments(raw json.RawMessage, members *rawjson.Members) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("arguments: not a JSON object")
	}
	// One pass refuses what the decoder would not (duplicate keys, depth:
	// Check counts the object itself as a level),
	// then encoding/json decodes: much cheaper than decoding token by
	// token (decodeStrict), and the same values.
	if err := rawjson.Check(raw, rawjson.CheckOptions{MaxDepth: maxJSONDepth + 1, Members: members}); err != nil {
		return nil, checkError(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("arguments: %w", err) // a number beyond float64
	}
	return m, nil
}

// checkError says why rawjson.Check refused a call's arguments.
func checkError(err error) error {
	if ce, ok := errors.AsType[*rawjson.CheckError](err); ok && ce.Reason == rawjson.Duplicate {
		return fmt.Errorf("arguments: key %q appears twice in one object", ce.Name)
	}
	if ce, ok := errors.AsType[*rawjson.CheckError](err); ok && ce.Reason == rawjson.CaseVariant {
		return fmt.Errorf("arguments: key %q is a case variant of %q, which a policy condition reads; a tool matching names case-insensitively would take it for that one: spell it %q", ce.Name, ce.Want, ce.Want)
	}
	return fmt.Errorf("arguments: %w", err)
}

// parseArgumentMembers is parseArguments for conditions that read only the
// members named keys (cond.Condition.ArgumentKeys): the whole text is
// refused alike (not an object, a key twice, too deep), but only those
// members are decoded, in the same pass, into the map; the others cannot
// change a condition's outcome, so they are left undecoded (a number
// beyond float64 in one of them is no error).
func parseArgumentMembers(raw json.RawMessage, keys []string, members *rawjson.Members) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("arguments: not a JSON object")
	}
	m := make(map[string]any, len(keys))
	var derr error
	root := func(name, value []byte) {
		i := slices.IndexFunc(keys, func(k string) bool { return k == string(name) })
		if i < 0 || derr != nil {
			return
		}
		m[keys[i]], derr = decodeValue(value)
	}
	if err := rawjson.Check(raw, rawjson.CheckOptions{MaxDepth: maxJSONDepth + 1, Root: root, Members: members}); err != nil {
		return nil, checkError(err)
	}
	if derr != nil {
		return nil, fmt.Errorf("arguments: %w", derr)
	}
	return m, nil
}

// decodeValue decodes one checked JSON value as encoding/json decodes it
// into any, without its machinery for the common scalars.
func decodeValue(v []byte) (any, error) {
	switch v[0] {
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	case '"':
		// Without escapes and in valid UTF-8 (encoding/json would replace
		// invalid bytes), the text between the quotes is the string.
		if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
			return string(s), nil
		}
	case '{', '[':
	default: // a number; beyond float64 is an error, as for encoding/json
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, fmt.Errorf("the number %s does not fit a float64", v)
		}
		return f, nil
	}
	var out any
	err := json.Unmarshal(v, &out)
	return out, err
}

// argumentMembers is the tree of the member paths conditions select in a
// call's arguments (nil: none).
func argumentMembers(paths [][]string) *rawjson.Members {
	if len(paths) == 0 {
		return nil
	}
	type node map[string]node
	root := node{}
	for _, p := range paths {
		n := root
		for _, k := range p {
			if n[k] == nil {
				n[k] = node{}
			}
			n = n[k]
		}
	}
	var build func(n node) *rawjson.Members
	build = func(n node) *rawjson.Members {
		if len(n) == 0 {
			return nil
		}
		spec := make(map[string]*rawjson.Members, len(n))
		for k, in := range n {
			spec[k] = build(in)
		}
		return rawjson.NewMembers(spec)
	}
	return build(root)
}
