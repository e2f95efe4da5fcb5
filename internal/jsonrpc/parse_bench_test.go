package jsonrpc

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse measures the one pass a message costs: validation, the
// duplicate and case-variant checks and the envelope's decoding.
func BenchmarkParse(b *testing.B) {
	var items strings.Builder
	for i := 0; items.Len() < 1<<20; i++ {
		if i > 0 {
			items.WriteByte(',')
		}
		fmt.Fprintf(&items, `{"type":"text","text":"line %d of the result"}`, i)
	}
	inputs := []struct{ name, data string }{
		{"small-call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":"p"}}}`},
		{"1MiB-result", `{"jsonrpc":"2.0","id":1,"result":{"content":[` + items.String() + `]}}`},
		{"1MiB-string-params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("abcdefgh", 1<<17) + `"}}}`},
	}
	for _, in := range inputs {
		data := []byte(in.data)
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
