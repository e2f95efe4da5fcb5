package core_test

import "github.com/mcpgw/mcpgw/internal/jsonrpc"

// describe shows an answer in failure messages as its exact bytes, or
// "none" when there was no answer.
func describe(m *jsonrpc.Message) string {
	if m == nil {
		return "none"
	}
	b, _ := jsonrpc.Encode(m)
	return string(b)
}
