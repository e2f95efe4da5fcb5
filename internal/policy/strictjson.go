package policy

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// maxJSONDepth bounds the nesting the strict decoder accepts.
const maxJSONDepth = 100

// decodeStrict decodes one JSON value from dec (which must UseNumber),
// refusing a key twice in one object — decoders that keep the first and
// the last duplicate would see two different documents, and the policy must
// judge the one the upstream will read — and nesting deeper than
// maxJSONDepth. Numbers stay json.Number, or become float64 with floats
// (as CEL reads JSON), refusing numbers beyond float64.
func decodeStrict(dec *json.Decoder, depth int, floats bool) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string) // the decoder only yields string keys here
				if _, dup := obj[k]; dup {
					return nil, fmt.Errorf("key %q appears twice in one object", k)
				}
				if obj[k], err = decodeStrict(dec, depth+1, floats); err != nil {
					return nil, err
				}
			}
			_, err := dec.Token() // '}'
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				x, err := decodeStrict(dec, depth+1, floats)
				if err != nil {
					return nil, err
				}
				arr = append(arr, x)
			}
			_, err := dec.Token() // ']'
			return arr, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if !floats {
			return t, nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: out of range", t)
		}
		return f, nil
	default:
		return t, nil // string, bool, nil
	}
}
