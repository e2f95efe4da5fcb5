package rawjson

import (
	"strings"
	"testing"
)

var benchTool = []byte(`{"name":"search","title":"Search","description":"Finds things","inputSchema":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]},"annotations":{"readOnlyHint":true},"_meta":{"k":"v"}}`)

func BenchmarkGetString(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if s, ok := GetString(benchTool, "_meta"); ok || s != "" {
			b.Fatal("_meta is not a string")
		}
		if s, _ := GetString(benchTool, "name"); s != "search" {
			b.Fatal(s)
		}
	}
}

func BenchmarkSetString(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SetString(benchTool, "name", "up__search"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetBigResult reads one member of a tool result that carries a
// 1 MiB text next to it, as the answer path does several times per call:
// the cost is in skipping (and validating) the big member.
func BenchmarkGetBigResult(b *testing.B) {
	big := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 1<<20) + `"}],"structuredContent":{"a":[1,2.5,true,null,{"b":"c"}]},"isError":false}`)
	b.SetBytes(int64(len(big)))
	b.ReportAllocs()
	for b.Loop() {
		if v, ok := Get(big, "isError"); !ok || string(v) != "false" {
			b.Fatal(string(v), ok)
		}
	}
}

// BenchmarkGetPastScalars is a Get that skips a member full of numbers and
// literals (tool schemas: "minimum": 0, "additionalProperties": false).
func BenchmarkGetPastScalars(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"tools":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"name":"t","inputSchema":{"type":"object","minimum":0,"maximum":1.5e3,"required":true,"additionalProperties":false,"default":null}}`)
	}
	sb.WriteString(`],"nextCursor":"x"}`)
	obj := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(obj)))
	for b.Loop() {
		if _, ok := Get(obj, "nextCursor"); !ok {
			b.Fatal("no nextCursor")
		}
	}
}
