package client

import (
	"net/http"
	"testing"
)

// TestCancelledRequest: the requestId of a notifications/cancelled,
// however its method is spelled in JSON, and nothing for any other
// message (the fast path compares the raw token).
func TestCancelledRequest(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, "7"},
		{`{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":"a"}}`, `"a"`},
		{`{"jsonrpc":"2.0","method":"notifications\u002fcancelled","params":{"requestId":1}}`, "1"},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, ""},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"requestId":3}}`, ""},
		{`{"jsonrpc":"2.0","method":"notifications\/progress","params":{"requestId":3}}`, ""},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, ""},
	} {
		if got := cancelledRequest([]byte(tc.msg)); got != tc.want {
			t.Errorf("cancelledRequest(%s) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// TestMediaType: the usual content types as they are, anything else
// through mime.ParseMediaType (parameters dropped, case folded).
func TestMediaType(t *testing.T) {
	for ct, want := range map[string]string{
		"application/json":                "application/json",
		"text/event-stream":               "text/event-stream",
		"application/json; charset=utf-8": "application/json",
		"Text/Event-Stream":               "text/event-stream",
		"":                                "",
		"text/plain":                      "text/plain",
	} {
		if got := mediaType(http.Header{"Content-Type": {ct}}); got != want {
			t.Errorf("mediaType(%q) = %q, want %q", ct, got, want)
		}
	}
}
