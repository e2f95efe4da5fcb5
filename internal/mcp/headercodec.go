package mcp

// The mirrored-header codec the x-mcp-header code builds on.
//
// Merge note: main's internal/mcp/headers.go (from the arch branch) defines
// these same four identifiers with the same meaning; when this branch is
// merged, delete this file and keep headers.go.

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// HeaderParamPrefix starts the name of every mirrored tool-argument header.
const HeaderParamPrefix = "Mcp-Param-"

// ParamHeader is the canonical name of the header mirroring the argument
// annotated x-mcp-header: name.
func ParamHeader(name string) string { return http.CanonicalHeaderKey(HeaderParamPrefix + name) }

// HeaderParam is one argument annotated x-mcp-header: its property path
// from the arguments object and its header name.
type HeaderParam struct {
	Path   []string
	Header string
}

// EncodeHeaderValue returns v as a header carries it: as it is when it is
// printable ASCII without leading or trailing space and does not look like
// the =?base64?…?= sentinel, else wrapped in the sentinel.
func EncodeHeaderValue(v string) string {
	plain := !strings.HasPrefix(v, "=?base64?") && strings.TrimSpace(v) == v
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] < 0x7f
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}
