package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// legacyUpstream is a 2025-11-25 Streamable HTTP server whose tools/call
// is served by call (with the request's id); everything else is a
// well-behaved handshake.
func legacyUpstream(t testing.TB, call func(w http.ResponseWriter, r *http.Request, id json.RawMessage)) *httptest.Server {
	t.Helper()
	return legacyUpstreamSession(t, "s1", call)
}

// legacyUpstreamSession is legacyUpstream giving session as its
// Mcp-Session-Id ("": none, as a server that keeps no session).
func legacyUpstreamSession(t testing.TB, session string, call func(w http.ResponseWriter, r *http.Request, id json.RawMessage)) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case mcp.MethodServerDiscover:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
		case mcp.MethodInitialize:
			w.Header().Set("Content-Type", "application/json")
			if session != "" {
				w.Header().Set("Mcp-Session-Id", session)
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
		case mcp.MethodToolsCall:
			call(w, r, m.ID)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestCancelledLegacyStreamIsClosed: a legacy request's answer stream
// outlives its caller (it is resumable), but once the call timed out and
// notifications/cancelled went out, nothing will read it: the stream is
// closed, so a hung upstream does not hold a connection and a reader per
// call for ever (the soak found 23 such calls after 10 minutes).
func TestCancelledLegacyStreamIsClosed(t *testing.T) {
	var open atomic.Int64
	ts := legacyUpstream(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		open.Add(1)
		defer open.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // hangs until the gateway lets go
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "t", Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const calls = 5
	for range calls {
		_, err := c.Call(ctx, mcp.MethodToolsCall, json.RawMessage(`{"name":"hang"}`), client.CallOptions{})
		var te *client.TimeoutError
		if !errors.As(err, &te) {
			t.Fatalf("call of a hung tool: %v, want a timeout", err)
		}
	}
	testwait.Until(t, "the timed-out calls to let go of their answer streams at the upstream", func() bool { return open.Load() == 0 })
}

// TestUnresumableStreamEndsTheCall: an upstream that closes a request's
// answer stream without answering and without an event id to resume from
// can never answer it (a response goes only on its request's stream): the
// call fails at once, naming why, not at its timeout.
func TestUnresumableStreamEndsTheCall(t *testing.T) {
	ts := legacyUpstream(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "t", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	resp, err := c.Call(ctx, mcp.MethodToolsCall, json.RawMessage(`{"name":"drop"}`), client.CallOptions{})
	if err != nil {
		t.Fatalf("call: %v, want the lost stream answered as an error response", err)
	}
	if resp.Error == nil || resp.Error.Code != mcp.CodeUpstreamUnavailable {
		t.Fatalf("answer %+v, want error %d", resp, mcp.CodeUpstreamUnavailable)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the call took %v: it waited for its timeout", d)
	}
}

// TestStreamEndWithAnswerReadByCaller: an upstream that ends its answer
// stream as it answers (the answer and the stream's end arrive together)
// has its connection back in the pool by the time the call returns: the
// end is read by the caller, with no goroutine to wait for it. One that
// ends the stream later still gets its connection back, from that
// goroutine.
func TestStreamEndWithAnswerReadByCaller(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail time.Duration // how long after the answer the stream ends
	}{{"end with the answer", 0}, {"end later", 30 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := legacyUpstream(t, func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", id)
				if tc.tail > 0 {
					w.(http.Flusher).Flush()
					time.Sleep(tc.tail) // the behaviour under test: a stream that ends after its answer
				} // else: returning writes the event and the stream's end in one write
			})
			tr := client.DefaultHTTPTransport()
			defer tr.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			st := client.NewStreamable(client.HTTPConfig{URL: ts.URL, Client: &http.Client{Transport: tr}})
			c, err := client.Connect(ctx, st, client.Options{Name: "t"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// What the handshake left kept, once its requests (some sent
			// after Connect returns) are done.
			before, handed := tr.Stats(), st.Handoffs()
			for settled := 0; settled < 10; {
				// A poll: settled once the counts stayed put ten times.
				time.Sleep(10 * time.Millisecond)
				if now := tr.Stats(); now == before {
					settled++
				} else {
					before, handed, settled = now, st.Handoffs(), 0
				}
			}
			for i := range 5 {
				if _, err := c.Call(ctx, mcp.MethodToolsCall, json.RawMessage(`{"name":"x"}`), client.CallOptions{}); err != nil {
					t.Fatal(err)
				}
				idle := tr.Stats().Idle
				if tc.tail == 0 && idle != before.Idle {
					t.Fatalf("call %d returned with %d idle connections, want its own back already (%d)", i, idle, before.Idle)
				}
				if tc.tail > 0 {
					if idle != before.Idle-1 {
						t.Fatalf("call %d: %d idle connections while its stream is still open, want %d", i, idle, before.Idle-1)
					}
					testwait.Until(t, fmt.Sprintf("call %d's connection to come back after its stream ended", i), func() bool { return tr.Stats().Idle == before.Idle })
				}
			}
			if now := tr.Stats(); now.Opened != before.Opened {
				t.Errorf("5 calls in turn opened %d connections, want none", now.Opened-before.Opened)
			}
			want := int64(0) // each stream finished by its caller
			if tc.tail > 0 {
				want = 5 // each stream's end waited for on a goroutine
			}
			if n := st.Handoffs() - handed; n != want {
				t.Errorf("%d streams handed to a goroutine, want %d", n, want)
			}
		})
	}
}
