package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// The 2026-07-28 Streamable HTTP transport mirrors parts of a request's
// body into headers so that intermediaries can route without reading it:
// Mcp-Method (the method), Mcp-Name (the target named by NameHeaderField)
// and one Mcp-Param-{Name} header for each tool argument whose schema marks
// it with x-mcp-header. A value a header cannot carry as it is travels in
// the =?base64?…?= sentinel. Every server that reads the body must check
// the headers against it. This file is the one codec for both sides: the
// gateway's client sets these headers, its downstream transport checks them.

// HeaderParamPrefix starts the name of every mirrored tool-argument header.
const HeaderParamPrefix = "Mcp-Param-"

// The sentinel around a base64 (standard alphabet, UTF-8) header value.
const (
	headerB64Prefix = "=?base64?"
	headerB64Suffix = "?="
)

// ParamHeader is the canonical name of the header mirroring the argument
// annotated x-mcp-header: name.
func ParamHeader(name string) string { return http.CanonicalHeaderKey(HeaderParamPrefix + name) }

// IsParamHeader reports whether key (in any letter case) names a mirrored
// tool-argument header.
func IsParamHeader(key string) bool {
	return len(key) > len(HeaderParamPrefix) && strings.EqualFold(key[:len(HeaderParamPrefix)], HeaderParamPrefix)
}

// EncodeHeaderValue returns v as a header carries it: as it is when it is
// printable ASCII without leading or trailing space and does not look like
// the sentinel, else wrapped in the sentinel.
func EncodeHeaderValue(v string) string {
	plain := !strings.HasPrefix(v, headerB64Prefix) && strings.TrimSpace(v) == v
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] < 0x7f
	}
	if plain {
		return v
	}
	return headerB64Prefix + base64.StdEncoding.EncodeToString([]byte(v)) + headerB64Suffix
}

// DecodeHeaderValue undoes EncodeHeaderValue; an error when the sentinel
// holds no valid base64.
func DecodeHeaderValue(v string) (string, error) {
	if inner, ok := strings.CutPrefix(v, headerB64Prefix); ok {
		if inner, ok = strings.CutSuffix(inner, headerB64Suffix); ok {
			b, err := base64.StdEncoding.DecodeString(inner)
			return string(b), err
		}
	}
	return v, nil
}

// SetMirrorHeaders sets the headers that mirror a request's method and
// target (Mcp-Method, Mcp-Name).
func SetMirrorHeaders(h http.Header, method string, params json.RawMessage) {
	h.Set(HeaderMethod, method)
	field := NameHeaderField(method)
	if field == "" {
		return
	}
	if v, ok := rawjson.GetString(params, field); ok {
		h.Set(HeaderName, EncodeHeaderValue(v))
	}
}

// CheckMirrorHeaders checks Mcp-Method and Mcp-Name against the body
// (-32020 when they disagree).
func CheckMirrorHeaders(h http.Header, method string, params json.RawMessage) *jsonrpc.Error {
	if got := h.Get(HeaderMethod); got != method {
		return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: Mcp-Method %q does not match the body's method %q", got, method)
	}
	if field := NameHeaderField(method); field != "" {
		body, _ := rawjson.GetString(params, field)
		return checkMirrorName(h, field, body)
	}
	return nil
}

// CheckMirrorParams is CheckMirrorHeaders of params as the edge read them.
func CheckMirrorParams(h http.Header, method string, p *Params) *jsonrpc.Error {
	field := NameHeaderField(method)
	if field == "" || !p.HasTarget || len(p.Target.Path) != 1 || p.Target.Path[0] != field {
		return CheckMirrorHeaders(h, method, p.Raw)
	}
	if got := h.Get(HeaderMethod); got != method {
		return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: Mcp-Method %q does not match the body's method %q", got, method)
	}
	return checkMirrorName(h, field, p.Name)
}

// checkMirrorName checks Mcp-Name against body, the params' field.
func checkMirrorName(h http.Header, field, body string) *jsonrpc.Error {
	got, err := DecodeHeaderValue(h.Get(HeaderName))
	if err != nil || got != body {
		return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: Mcp-Name %q does not match params.%s %q", h.Get(HeaderName), field, body)
	}
	return nil
}

// HeaderParam is one argument annotated x-mcp-header: its property path
// from the arguments object and its header name.
type HeaderParam struct {
	Path   []string
	Header string
}

// HeaderAnnotation is the input-schema key that maps a tool argument to
// an Mcp-Param-* header (2026-07-28).
const HeaderAnnotation = "x-mcp-header"

// mayAnnotate reports whether schema may carry an x-mcp-header
// annotation: the key spelled out, or a \u escape, which could spell it.
// A schema with neither has none and is not walked (the walk runs on
// every 2026-07-28 tools/call, once for the caller's headers and once
// for the upstream's).
func mayAnnotate(schema []byte) bool {
	return bytes.Contains(schema, []byte(HeaderAnnotation)) || bytes.Contains(schema, []byte(`\u`))
}

// HeaderParams finds the x-mcp-header annotations of an input schema
// reachable from its root through "properties" chains only, as the spec
// defines them. It is lenient: an annotation that is not a non-empty
// string is skipped (ValidHeaderParams is the one that refuses it).
func HeaderParams(schema json.RawMessage) []HeaderParam {
	var out []HeaderParam
	_ = walkHeaderAnnotations(schema, func(path []string, prop, _ json.RawMessage) error {
		if h, ok := rawjson.GetString(prop, HeaderAnnotation); ok && h != "" {
			out = append(out, HeaderParam{Path: path, Header: h})
		}
		return nil
	})
	return out
}

// walkHeaderAnnotations calls fn, in document order, for each property
// reachable from schema's root through "properties" chains (at most
// maxSchemaDepth deep) that has an x-mcp-header member, with the
// property's path, its schema and the member's raw value. fn's error ends
// the walk and is returned. path is fn's to keep.
func walkHeaderAnnotations(schema json.RawMessage, fn func(path []string, prop, annotation json.RawMessage) error) error {
	if !mayAnnotate(schema) {
		return nil
	}
	var walk func(s json.RawMessage, path []string, depth int) error
	walk = func(s json.RawMessage, path []string, depth int) error {
		props, ok := rawjson.Get(s, "properties")
		if !ok || depth > maxSchemaDepth {
			return nil
		}
		fields, err := rawjson.Fields(props)
		if err != nil {
			return nil
		}
		for _, f := range fields {
			p := append(append([]string(nil), path...), f.Key)
			if raw, ok := rawjson.Get(f.Value, HeaderAnnotation); ok {
				if err := fn(p, f.Value, raw); err != nil {
					return err
				}
			}
			if err := walk(f.Value, p, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(schema, nil, 0)
}

// CheckParamHeaders checks a tools/call's Mcp-Param-* headers in h against
// its arguments, for the tool whose input schema is schema: nil when they
// agree, a -32020 error naming the header when not. An argument the call
// leaves out (or sends as null) needs no header.
func CheckParamHeaders(schema, args json.RawMessage, h http.Header) *jsonrpc.Error {
	for _, hp := range HeaderParams(schema) {
		value, present := rawjson.Lookup(args, hp.Path)
		if !present || string(value) == "null" {
			continue // the client omits the header; nothing to check
		}
		key := HeaderParamPrefix + hp.Header
		raw, sent := h[ParamHeader(hp.Header)]
		if !sent || len(raw) != 1 {
			return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: missing %s header for parameter %q", key, strings.Join(hp.Path, "."))
		}
		if !headerSafe(raw[0]) {
			return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: %s contains characters a header value cannot carry; encode it as =?base64?...?=", key)
		}
		got, err := DecodeHeaderValue(raw[0])
		if err != nil {
			return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: %s is not valid base64 inside =?base64?...?=", key)
		}
		if !sameValue(got, value) {
			return jsonrpc.Errorf(CodeHeaderMismatch, "header mismatch: %s header value %q does not match the argument %s", key, got, value)
		}
	}
	return nil
}

// headerSafe reports whether v is a plain header value: visible ASCII,
// space and tab (RFC 9110).
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
