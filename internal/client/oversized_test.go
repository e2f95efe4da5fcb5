package client

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// An answer longer than max_line_bytes is dropped, and its caller is
// answered at once with an error naming the bound, rather than left to
// wait out the upstream timeout.
func TestStdioOversizedAnswerFailsItsCall(t *testing.T) {
	got := make(chan []byte, 4)
	s := NewStdio(StdioConfig{
		// One answer of about 3000 bytes, then a short one.
		Argv:         []string{"sh", "-c", `printf '{"jsonrpc":"2.0","id":7,"result":{"x":"'; head -c 3000 /dev/zero | tr '\0' a; printf '"}}\n{"jsonrpc":"2.0","id":8,"result":{}}\n'; sleep 5`},
		MaxLineBytes: 1024,
		Stderr:       NewStderrLog(StderrOptions{}),
	})
	if err := s.Start(context.Background(), func(msg []byte, _ jsonrpc.ID) bool { got <- msg; return false }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := testwait.Recv(t, got, "a message from the child")
	m, err := jsonrpc.Parse(first)
	if err != nil || string(m.ID) != "7" || m.Error == nil || !strings.Contains(m.Error.Message, "max_line_bytes (1024 bytes)") {
		t.Fatalf("first message %s (%v); want an error for id 7 naming max_line_bytes", first, err)
	}
	if second := testwait.Recv(t, got, "a message from the child"); string(second) != `{"jsonrpc":"2.0","id":8,"result":{}}` {
		t.Fatalf("second message %s", second)
	}
	if n := s.Stats().OversizedLines; n != 1 {
		t.Errorf("OversizedLines = %d, want 1", n)
	}
}

// Only a response whose id comes, at the top level, before its result is
// answered; anything doubtful names no call.
func TestOversizedAnswerID(t *testing.T) {
	for _, tc := range []struct{ head, want string }{
		{`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"te`, "7"},
		{`{"id":"a-1","jsonrpc":"2.0","error":{"code":1,"message":"xxxx`, `"a-1"`},
		{`{"jsonrpc":"2.0","result":{"id":3,"x":"yyyy`, ""},                           // id only inside the result
		{`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"`, ""}, // a request
		{`{"jsonrpc":"2.0","id":1,"id":2,"result":{`, ""},                             // id twice
		{`{"jsonrpc":"2.0","id":null,"result":{`, ""},
		{`{"jsonrpc":"2.0","id":{"a":1},"result":{`, ""},
		{`{"jsonrpc":"2.0","id":12`, ""}, // cut inside the id
		{`[{"jsonrpc":"2.0","id":1,"result":{`, ""},
		{`garbage`, ""},
	} {
		if got := string(oversizedAnswerID([]byte(tc.head))); got != tc.want {
			t.Errorf("oversizedAnswerID(%s) = %q, want %q", tc.head, got, tc.want)
		}
	}
}
