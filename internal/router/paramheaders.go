package router

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// 2026-07-28 lets a tool mark input parameters with x-mcp-header; clients
// mirror their values into Mcp-Param-{Name} headers so that intermediaries
// can route on them, and every server that reads the body must check the
// headers against it. The gateway reads the body, so it checks — whatever
// the upstream's transport (a stdio upstream never sees the headers).

// headerParam is one annotated parameter: its property path and header name.
type headerParam struct {
	path   []string
	header string
}

// headerParams finds the x-mcp-header annotations reachable from the schema
// root through "properties" chains only, as the spec defines them.
func headerParams(schema json.RawMessage) []headerParam {
	var out []headerParam
	var walk func(s json.RawMessage, path []string, depth int)
	walk = func(s json.RawMessage, path []string, depth int) {
		props, ok := rawjson.Get(s, "properties")
		if !ok || depth > 16 {
			return
		}
		fields, _ := rawjson.Fields(props)
		for _, f := range fields {
			p := append(append([]string(nil), path...), f.Key)
			if h, ok := rawjson.GetString(f.Value, "x-mcp-header"); ok && h != "" {
				out = append(out, headerParam{path: p, header: h})
			}
			walk(f.Value, p, depth+1)
		}
	}
	walk(schema, nil, 0)
	return out
}

// checkParamHeaders validates a stateless tools/call's Mcp-Param-* headers
// against its arguments. It returns nil when they agree (or the tool has no
// annotations, or is unknown: the upstream answers that).
func (rt *Router) checkParamHeaders(ctx context.Context, sess *Session, msg *jsonrpc.Message, h http.Header) *jsonrpc.Error {
	name, _ := rawjson.GetString(msg.Params, "name")
	schema, ok := sess.route().view.ToolSchema(ctx, name)
	if !ok {
		return nil
	}
	params := headerParams(schema)
	if len(params) == 0 {
		return nil
	}
	args, _ := rawjson.Get(msg.Params, "arguments")
	for _, hp := range params {
		value, present := lookupPath(args, hp.path)
		if present && string(value) == "null" {
			present = false
		}
		key := "Mcp-Param-" + hp.header
		raw, sent := h[http.CanonicalHeaderKey(key)]
		if !present {
			continue // the client omits the header; nothing to check
		}
		if !sent || len(raw) != 1 {
			return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: missing %s header for parameter %q", key, strings.Join(hp.path, "."))
		}
		if !headerSafe(raw[0]) {
			return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: %s contains characters a header value cannot carry; encode it as =?base64?...?=", key)
		}
		got, err := decodeHeaderValue(raw[0])
		if err != nil {
			return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: %s is not valid base64 inside =?base64?...?=", key)
		}
		if !sameValue(got, value) {
			return jsonrpc.Errorf(mcp.CodeHeaderMismatch, "header mismatch: %s header value %q does not match the argument %s", key, got, value)
		}
	}
	return nil
}

// lookupPath returns the value at a chain of object keys.
func lookupPath(obj json.RawMessage, path []string) (json.RawMessage, bool) {
	for _, k := range path {
		v, ok := rawjson.Get(obj, k)
		if !ok {
			return nil, false
		}
		obj = v
	}
	return obj, true
}

// headerSafe reports whether v is a plain header value: visible ASCII,
// space and tab (RFC 9110), without the leading or trailing whitespace a
// client must have encoded.
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\t' && (c < 0x20 || c > 0x7e) {
			return false
		}
	}
	return true
}

// sameValue compares a header's decoded string with a JSON argument: strings
// exactly, numbers numerically (42 and 42.0 agree), booleans as true/false.
func sameValue(header string, arg json.RawMessage) bool {
	if len(arg) == 0 {
		return false
	}
	switch arg[0] {
	case '"':
		var s string
		return json.Unmarshal(arg, &s) == nil && s == header
	case 't', 'f':
		return string(arg) == header
	default:
		a, ok1 := new(big.Float).SetString(string(arg))
		b, ok2 := new(big.Float).SetString(header)
		return ok1 && ok2 && a.Cmp(b) == 0
	}
}
