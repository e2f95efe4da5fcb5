package mcp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// 2026-07-28 (SEP-2243) lets a tool mark input parameters with
// x-mcp-header: a client calling the tool over Streamable HTTP mirrors each
// such argument into an Mcp-Param-{Name} header, so that intermediaries can
// route on it without reading the body. A tool whose annotations are
// invalid must be excluded by the client.

// maxSchemaDepth bounds the properties chains walked for annotations.
const maxSchemaDepth = 16

// ValidHeaderParams returns a tool inputSchema's x-mcp-header annotations,
// found through "properties" chains from the root as the spec defines
// them, and an error naming the first invalid one: an empty name, a name
// that is not an HTTP token (spaces, colons, non-ASCII, control
// characters), a name used twice (case-insensitively, as header names
// compare), or an annotation on a parameter whose type is not string,
// integer or boolean. A client must not call a tool with an invalid one.
func ValidHeaderParams(schema json.RawMessage) ([]HeaderParam, error) {
	var out []HeaderParam
	seen := map[string]string{} // lower-cased header → property path
	err := walkHeaderAnnotations(schema, func(path []string, prop, raw json.RawMessage) error {
		dotted := strings.Join(path, ".")
		var h string
		if err := json.Unmarshal(raw, &h); err != nil {
			return fmt.Errorf("property %q: x-mcp-header must be a string, not %s", dotted, raw)
		}
		if err := validHeaderName(h); err != nil {
			return fmt.Errorf("property %q: x-mcp-header %q %v", dotted, h, err)
		}
		if other, dup := seen[strings.ToLower(h)]; dup {
			return fmt.Errorf("properties %q and %q both name header %s%s (header names compare case-insensitively)", other, dotted, HeaderParamPrefix, h)
		}
		if err := primitiveType(prop); err != nil {
			return fmt.Errorf("property %q (x-mcp-header %q): %v", dotted, h, err)
		}
		seen[strings.ToLower(h)] = dotted
		out = append(out, HeaderParam{Path: path, Header: h})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// validHeaderName checks that name can follow Mcp-Param- in a header name:
// one or more RFC 9110 token characters.
func validHeaderName(name string) error {
	if name == "" {
		return fmt.Errorf("is empty")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return fmt.Errorf("has %q, which a header name cannot contain (use letters, digits and !#$%%&'*+-.^_`|~)", name[i:i+1])
		}
	}
	return nil
}

// primitiveType accepts the parameter types a header can carry exactly:
// string, integer and boolean (with null allowed beside one of them, since
// a null argument sends no header). number is excluded: a float's text is
// not one canonical value.
func primitiveType(prop json.RawMessage) error {
	raw, ok := rawjson.Get(prop, "type")
	if !ok {
		return fmt.Errorf("has no type; x-mcp-header applies only to string, integer or boolean parameters")
	}
	var types []string
	if err := json.Unmarshal(raw, &types); err != nil {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return fmt.Errorf("has an unreadable type %s", raw)
		}
		types = []string{one}
	}
	n := 0
	for _, t := range types {
		switch t {
		case "string", "integer", "boolean":
			n++
		case "null":
		default:
			return fmt.Errorf("is of type %q; x-mcp-header applies only to string, integer or boolean parameters", t)
		}
	}
	if n == 0 {
		return fmt.Errorf("is of type %s; x-mcp-header applies only to string, integer or boolean parameters", raw)
	}
	return nil
}

// ParamHeaders returns the Mcp-Param-* headers for a tools/call of a tool
// with this inputSchema and these arguments: one per annotated argument
// that is present and not null. It fails when the schema's annotations are
// invalid (the tool must not be called).
func ParamHeaders(schema, args json.RawMessage) (http.Header, error) {
	params, err := ValidHeaderParams(schema)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	for _, p := range params {
		v, ok := rawjson.Lookup(args, p.Path)
		if !ok {
			continue
		}
		if s, ok := ParamHeaderValue(v); ok {
			h[ParamHeader(p.Header)] = []string{s}
		}
	}
	return h, nil
}

// ParamHeaderValue is the header text of one argument: a string as itself
// (base64-wrapped by EncodeHeaderValue when a header cannot carry it
// plainly), a number as its JSON text, a boolean as true or false. Null and
// structured values send no header.
func ParamHeaderValue(v json.RawMessage) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return EncodeHeaderValue(s), true
	case 't', 'f':
		return string(v), true
	case 'n', '{', '[':
		return "", false
	}
	return string(v), true
}
