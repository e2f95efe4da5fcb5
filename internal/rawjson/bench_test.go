package rawjson

import "testing"

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
