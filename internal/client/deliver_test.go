package client

import (
	"io"
	"net/http"
	"strings"
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

// readBody reads a JSON answer whole: at its Content-Length in one
// buffer, or as it comes when none is given, and never past max+1.
func TestReadBody(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		length  int64
		max     int
		want    string
		exact   bool // read into a buffer of the announced size
		wantErr bool
	}{
		{"with a length", `{"a":1}`, 7, 100, `{"a":1}`, true, false},
		{"without", `{"a":1}`, -1, 100, `{"a":1}`, false, false},
		{"empty", ``, 0, 100, ``, true, false},
		{"longer than max, announced", `{"a":12345}`, 11, 5, `{"a":1`, false, false},
		{"longer than max, not announced", `{"a":12345}`, -1, 5, `{"a":1`, false, false},
		{"shorter than announced", `{"a"`, 7, 100, ``, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{ContentLength: tc.length, Body: io.NopCloser(strings.NewReader(tc.body))}
			got, err := readBody(resp, tc.max)
			if (err != nil) != tc.wantErr || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q (error: %v)", got, err, tc.want, tc.wantErr)
			}
			if tc.exact && cap(got) != len(got) {
				t.Errorf("capacity %d for %d bytes", cap(got), len(got))
			}
		})
	}
}
