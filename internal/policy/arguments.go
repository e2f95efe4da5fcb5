package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxArgumentDepth bounds the nesting of arguments conditions look at.
const maxArgumentDepth = 100

// parseArguments decodes a call's arguments for conditions: nil for none
// (absent or JSON null). It refuses what conditions must not guess about:
// anything but an object, a key twice in one object (decoders that keep
// the first and the last duplicate would see different calls), nesting
// deeper than maxArgumentDepth, and numbers beyond float64. Numbers are
// float64, as CEL reads JSON.
func parseArguments(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("arguments: not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := argValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("arguments: data after the JSON object")
	}
	return v.(map[string]any), nil
}

func argValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxArgumentDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxArgumentDepth)
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
				if obj[k], err = argValue(dec, depth+1); err != nil {
					return nil, err
				}
			}
			_, err := dec.Token() // '}'
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				x, err := argValue(dec, depth+1)
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
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: out of range", t)
		}
		return f, nil
	default:
		return t, nil // string, bool, nil
	}
}
