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

// TestProgressToken: params._meta.progressToken, however its key is
// spelled, and nothing when there is none (the fast path skips the scan
// only when neither the key nor an escape occurs).
func TestProgressToken(t *testing.T) {
	for _, tc := range []struct {
		params, want string
		ok           bool
	}{
		{`{"name":"x","_meta":{"progressToken":7}}`, "7", true},
		{`{"name":"x","_meta":{"progress\u0054oken":"t"}}`, `"t"`, true},
		{`{"name":"x","arguments":{"s":"a\\b"},"_meta":{"progressToken":1}}`, "1", true},
		{`{"name":"x","_meta":{"progressToken":null}}`, "", false},
		{`{"name":"x","arguments":{"progressToken":3}}`, "", false},
		{`{"name":"x"}`, "", false},
		{`{"name":"x","arguments":{"s":"a\\b"}}`, "", false},
	} {
		got, ok := progressToken([]byte(tc.params))
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("progressToken(%s) = %s, %v; want %s, %v", tc.params, got, ok, tc.want, tc.ok)
		}
	}
}
