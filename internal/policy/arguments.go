package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// parseArguments decodes a call's arguments for conditions: nil for none
// (absent or JSON null). It refuses what conditions must not guess about:
// anything but an object, a key twice in one object (decoders that keep
// the first and the last duplicate would see different calls), nesting
// deeper than maxJSONDepth, and numbers beyond float64. Numbers are
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
	v, err := decodeStrict(dec, 0, true)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("arguments: data after the JSON object")
	}
	return v.(map[string]any), nil
}
