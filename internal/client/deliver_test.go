package client

import (
	"testing"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// deliver says whether a message was the answer to the request whose
// stream carried it (Streamable's legacy streams use that instead of a
// scan of their own), and hands a waiting call its answer either way.
func TestDeliverReportsTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msg     string
		related jsonrpc.ID
		want    bool
		waiting bool // the call with id 7 gets an answer
	}{
		{"the answer", `{"jsonrpc":"2.0","id":7,"result":{}}`, jsonrpc.IntID(7), true, true},
		{"an error answer", `{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"m"}}`, jsonrpc.IntID(7), true, true},
		{"a refused answer is still the answer", `{"jsonrpc":"2.0","id":7,"result":{},"result":{}}`, jsonrpc.IntID(7), true, true},
		{"another call's answer", `{"jsonrpc":"2.0","id":7,"result":{}}`, jsonrpc.IntID(8), false, true},
		{"no stream", `{"jsonrpc":"2.0","id":7,"result":{}}`, nil, false, true},
		{"same id as a string", `{"jsonrpc":"2.0","id":"7","result":{}}`, jsonrpc.IntID(7), false, false},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`, jsonrpc.IntID(7), false, false},
		{"not JSON", `{"jsonrpc":`, jsonrpc.IntID(7), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan *jsonrpc.Message, 1)
			c := &Client{log: zap.NewNop(), pending: map[string]*call{"7": {id: jsonrpc.IntID(7), done: done}}}
			if got := c.deliver([]byte(tc.msg), tc.related); got != tc.want {
				t.Errorf("answered = %v, want %v", got, tc.want)
			}
			select {
			case m := <-done:
				if !tc.waiting {
					t.Errorf("call 7 was handed %+v", m)
				}
			default:
				if tc.waiting {
					t.Error("call 7 got no answer")
				}
			}
		})
	}
}
