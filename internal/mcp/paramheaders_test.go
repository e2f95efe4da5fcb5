package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestValidHeaderParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		want   string // fmt of the params, or the error's substring after "error: "
	}{
		{"none", `{"type":"object","properties":{"q":{"type":"string"}}}`, "[]"},
		{"no properties", `{"type":"object"}`, "[]"},
		{"flat and nested", `{"properties":{"region":{"type":"string","x-mcp-header":"Region"},"opts":{"type":"object","properties":{"limit":{"type":"integer","x-mcp-header":"Limit"}}},"ok":{"type":["boolean","null"],"x-mcp-header":"Ok"}}}`,
			"[{[region] Region} {[opts limit] Limit} {[ok] Ok}]"},
		{"empty name", `{"properties":{"v":{"type":"string","x-mcp-header":""}}}`, "error: is empty"},
		{"space", `{"properties":{"v":{"type":"string","x-mcp-header":"My Region"}}}`, `error: has " "`},
		{"colon", `{"properties":{"v":{"type":"string","x-mcp-header":"Region:Primary"}}}`, `error: has ":"`},
		{"non-ASCII", `{"properties":{"v":{"type":"string","x-mcp-header":"Région"}}}`, "error: which a header name cannot contain"},
		{"control", `{"properties":{"v":{"type":"string","x-mcp-header":"Region\t1"}}}`, `error: has "\t"`},
		{"not a string", `{"properties":{"v":{"type":"string","x-mcp-header":7}}}`, "error: x-mcp-header must be a string"},
		{"duplicate", `{"properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"Region"}}}`, `error: properties "a" and "b" both name header Mcp-Param-Region`},
		{"duplicate in another case", `{"properties":{"a":{"type":"string","x-mcp-header":"MyField"},"b":{"type":"string","x-mcp-header":"myfield"}}}`, "error: compare case-insensitively"},
		{"number", `{"properties":{"s":{"type":"number","x-mcp-header":"Score"}}}`, `error: is of type "number"`},
		{"object", `{"properties":{"d":{"type":"object","x-mcp-header":"Data"}}}`, `error: is of type "object"`},
		{"array", `{"properties":{"i":{"type":"array","x-mcp-header":"Items"}}}`, `error: is of type "array"`},
		{"null", `{"properties":{"n":{"type":"null","x-mcp-header":"Nil"}}}`, `error: is of type "null"`},
		{"no type", `{"properties":{"n":{"x-mcp-header":"Nil"}}}`, "error: has no type"},
		// The key spelled with escapes is the same key: the walk that is
		// skipped for a schema without "x-mcp-header" still runs.
		{"escaped key", `{"properties":{"region":{"type":"string","\u0078-mcp-header":"Region"}}}`, "[{[region] Region}]"},
		{"escaped invalid", `{"properties":{"v":{"type":"string","x-mcp-h\u0065ader":""}}}`, "error: is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := ValidHeaderParams(json.RawMessage(tc.schema))
			got := fmt.Sprint(ps)
			if ps == nil && err == nil {
				got = "[]"
			}
			if err != nil {
				got = "error: " + err.Error()
			}
			if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("got %s, want an error containing %q", got, want)
				}
				return
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParamHeaders(t *testing.T) {
	schema := json.RawMessage(`{"properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"n":{"type":"integer","x-mcp-header":"N"},
		"flag":{"type":"boolean","x-mcp-header":"Flag"},
		"off":{"type":"boolean","x-mcp-header":"Off"},
		"skip":{"type":["string","null"],"x-mcp-header":"Skip"},
		"absent":{"type":"string","x-mcp-header":"Absent"},
		"empty":{"type":"string","x-mcp-header":"Empty"},
		"padded":{"type":"string","x-mcp-header":"Padded"},
		"uni":{"type":"string","x-mcp-header":"Uni"},
		"lines":{"type":"string","x-mcp-header":"Lines"},
		"wrapper":{"type":"string","x-mcp-header":"Wrapper"},
		"plain":{"type":"number"}}}`)
	args := json.RawMessage(`{"region":"us west 1","n":42,"flag":true,"off":false,"skip":null,"empty":"",
		"padded":" x ","uni":"Hello, 世界","lines":"a\r\nb","wrapper":"=?base64?eA==?=","plain":3.14}`)
	h, err := ParamHeaders(schema, args)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Mcp-Param-Region":  "us west 1",
		"Mcp-Param-N":       "42",
		"Mcp-Param-Flag":    "true",
		"Mcp-Param-Off":     "false",
		"Mcp-Param-Empty":   "",
		"Mcp-Param-Padded":  "=?base64?IHgg?=",
		"Mcp-Param-Uni":     "=?base64?SGVsbG8sIOS4lueVjA==?=",
		"Mcp-Param-Lines":   "=?base64?YQ0KYg==?=",
		"Mcp-Param-Wrapper": "=?base64?PT9iYXNlNjQ/ZUE9PT89?=",
	}
	if len(h) != len(want) {
		t.Errorf("headers %v, want exactly %v (null, absent and unannotated arguments send none)", h, want)
	}
	for k, v := range want {
		if got, ok := h[k]; !ok || len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if _, err := ParamHeaders(json.RawMessage(`{"properties":{"s":{"type":"number","x-mcp-header":"S"}}}`), args); err == nil {
		t.Error("an invalid annotation gave headers instead of an error")
	}
}
