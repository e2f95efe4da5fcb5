package rawjson

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// callWith wraps arguments in a tools/call message.
func callWith(args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + args + `,"_meta":{"progressToken":"p"}}}`)
}

// benchInputs are the shapes Check must stay linear on: 1 MiB of
// arguments as many members, one string, many small objects, and nesting
// at the depth limit.
func benchInputs() []struct {
	name string
	data []byte
} {
	var members, objects strings.Builder
	members.WriteByte('{')
	for i := 0; members.Len() < 1<<20; i++ {
		if i > 0 {
			members.WriteByte(',')
		}
		fmt.Fprintf(&members, `"member%06d":"value %d"`, i, i)
	}
	members.WriteByte('}')
	objects.WriteByte('[')
	for i := 0; objects.Len() < 1<<20; i++ {
		if i > 0 {
			objects.WriteByte(',')
		}
		fmt.Fprintf(&objects, `{"id":%d,"name":"n%d","tags":["a","b"]}`, i, i)
	}
	objects.WriteByte(']')
	obj := objects.String()
	return []struct {
		name string
		data []byte
	}{
		{"small-call", callWith(`{"text":"hello","n":[1,2,{"a":null}]}`)},
		{"1MiB-members", callWith(members.String())},
		{"1MiB-string", callWith(`{"text":"` + strings.Repeat("abcdefgh", 1<<17) + `"}`)},
		{"1MiB-objects", callWith(`{"items":` + obj + `}`)},
		{"deep-509", callWith(nest(`{"a":`, "}", DefaultMaxDepth-3, "1"))},
	}
}

func BenchmarkCheck(b *testing.B) {
	for _, in := range benchInputs() {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in.data)))
			for b.Loop() {
				if err := Check(in.data, CheckOptions{Members: testMembers}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJSONValid is the yardstick: encoding/json's validation alone,
// which finds neither duplicates nor case variants.
func BenchmarkJSONValid(b *testing.B) {
	for _, in := range benchInputs() {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in.data)))
			for b.Loop() {
				if !json.Valid(in.data) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
