package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpgw/mcpgw/internal/rawjson"
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
	// One pass refuses what the decoder would not (duplicate keys, depth:
	// Check counts the object itself as a level),
	// then encoding/json decodes: much cheaper than decoding token by
	// token (decodeStrict), and the same values.
	if err := rawjson.Check(raw, rawjson.CheckOptions{MaxDepth: maxJSONDepth + 1}); err != nil {
		if ce, ok := errors.AsType[*rawjson.CheckError](err); ok && ce.Reason == rawjson.Duplicate {
			return nil, fmt.Errorf("arguments: key %q appears twice in one object", ce.Name)
		}
		return nil, fmt.Errorf("arguments: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("arguments: %w", err) // a number beyond float64
	}
	return m, nil
}
