package mcp

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// HopPrefix marks the _meta keys that describe one protocol hop — version,
// client identity and capabilities, log level, server identity,
// subscription id — rather than the payload: the gateway rewrites them for
// each hop, like request ids. A few keys under the prefix are payload
// (IsHopKey).
const HopPrefix = "io.modelcontextprotocol/"

// IsHopKey reports whether a _meta key describes the protocol hop rather
// than the payload. The tasks keys are payload: they name a task (whose id
// the gateway translates, like any id it hands out) or carry text for the
// model, and a client needs them whatever revision it speaks.
func IsHopKey(k string) bool {
	return strings.HasPrefix(k, HopPrefix) && k != MetaRelatedTask && k != MetaModelImmediateResponse
}

// WithoutHopMeta returns obj (params or a result) without the hop keys of
// its _meta, and without a _meta they leave empty; anything else is kept
// byte for byte. obj comes back unchanged when it carries none.
func WithoutHopMeta(obj json.RawMessage) (json.RawMessage, error) {
	meta, ok := rawjson.Get(obj, "_meta")
	// The quick test must not be fooled by a key spelled with escapes
	// ("io.modelcontextprotocol\/…" is the same key): any backslash means
	// the keys are read properly.
	if !ok || (!bytes.Contains(meta, []byte(HopPrefix)) && bytes.IndexByte(meta, '\\') < 0) {
		return obj, nil
	}
	fields, err := rawjson.Fields(meta)
	if err != nil {
		return nil, err
	}
	kept := len(fields)
	for _, f := range fields {
		if IsHopKey(f.Key) {
			if meta, err = rawjson.Delete(meta, f.Key); err != nil {
				return nil, err
			}
			kept--
		}
	}
	if kept == 0 {
		return rawjson.Delete(obj, "_meta")
	}
	return rawjson.Set(obj, "_meta", meta)
}
