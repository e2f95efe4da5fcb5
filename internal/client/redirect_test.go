package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// TestPostRedirects: what a Streamable HTTP upstream's redirect of a POST
// does. A 307 or 308 to the same origin is followed with the same body and
// headers (a server mounted at /mcp/ redirecting /mcp is common); one to
// another origin, a 301/302/303 (which would turn the POST into a GET
// without the message) and a loop are refused with an error naming the
// fix, and nothing reaches the other origin.
func TestPostRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer other.Close()

	for _, tc := range []struct {
		name   string
		status int
		to     string // the Location, relative to the upstream ("OTHER": the other server)
		errHas string // "" : answered
	}{
		{"307, same origin", http.StatusTemporaryRedirect, "/mcp/", ""},
		{"308, same origin", http.StatusPermanentRedirect, "/mcp/", ""},
		{"307, another origin", http.StatusTemporaryRedirect, "OTHER", "another origin"},
		{"302", http.StatusFound, "/mcp/", "into a GET"},
		{"303", http.StatusSeeOther, "/mcp/", "into a GET"},
		{"a loop", http.StatusTemporaryRedirect, "/mcp", "redirected the message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var answered atomic.Int64
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/mcp" {
					to := tc.to
					if to == "OTHER" {
						to = other.URL + "/mcp"
					}
					w.Header().Set("Location", to)
					w.WriteHeader(tc.status)
					return
				}
				body, _ := io.ReadAll(r.Body)
				var m struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				if r.Method != http.MethodPost || json.Unmarshal(body, &m) != nil || r.Header.Get("X-Api-Key") != "k" {
					http.Error(w, fmt.Sprintf("got %s %q with X-Api-Key %q", r.Method, body, r.Header.Get("X-Api-Key")), http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				switch m.Method {
				case "initialize":
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
				case "tools/call":
					answered.Add(1)
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, m.ID)
				default:
					w.WriteHeader(http.StatusAccepted)
				}
			}))
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tr := client.NewStreamable(client.HTTPConfig{URL: ts.URL + "/mcp", Headers: map[string]string{"x-api-key": "k"}})
			c, err := client.Connect(ctx, tr, client.Options{Name: "t", Protocol: "legacy"})
			if tc.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				resp, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"x"}`), client.CallOptions{})
				if err != nil || resp.Error != nil || string(resp.Result) != `{"content":[]}` {
					t.Fatalf("call through the redirect: %v %+v", err, resp)
				}
				if answered.Load() != 1 {
					t.Errorf("the call was answered %d times, want 1", answered.Load())
				}
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("connected through a redirect that must be refused")
			}
			if !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "url") {
				t.Errorf("error %q: want it to say %q and name the url setting", err, tc.errHas)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the other origin got %d requests", n)
			}
		})
	}
}

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestPostIsOneWrite: a message's POST leaves in one write, headers and
// body together (net/http flushes the headers apart, a second write and
// packet per call, unless it knows the body is in memory).
func TestPostIsOneWrite(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer ts.Close()
	var writes atomic.Int64
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}}
	defer tr.CloseIdleConnections()
	s := client.NewStreamable(client.HTTPConfig{URL: ts.URL, Client: &http.Client{Transport: tr}, Headers: map[string]string{"X-Api-Key": "k"}})
	if err := s.Start(context.Background(), func([]byte, jsonrpc.ID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		writes.Store(0)
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%d,"progress":1}}`, i)
		if err := s.Send(context.Background(), []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if n := writes.Load(); n != 1 {
			t.Errorf("POST %d took %d writes, want 1", i, n)
		}
	}
}

// TestGetStreamRedirects: the GET stream follows the same policy as the
// POSTs. A redirect within the upstream's origin is followed, with the
// configured headers; one to another origin is not, and nothing — least of
// all the configured headers — reaches it.
func TestGetStreamRedirects(t *testing.T) {
	for _, tc := range []struct {
		name      string
		crossOrig bool
	}{{"same origin", false}, {"another origin", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var elsewhere, redirected, streamed atomic.Int64
			var streamKey atomic.Value
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				w.WriteHeader(http.StatusTeapot)
			}))
			defer other.Close()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/mcp":
					redirected.Add(1)
					to := "/mcp/events"
					if tc.crossOrig {
						to = other.URL + "/events"
					}
					w.Header().Set("Location", to)
					w.WriteHeader(http.StatusFound)
				case r.Method == http.MethodGet && r.URL.Path == "/mcp/events":
					streamKey.Store(r.Header.Get("X-Api-Key"))
					streamed.Add(1)
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
					<-r.Context().Done()
				case r.Method == http.MethodPost:
					body, _ := io.ReadAll(r.Body)
					var m struct {
						ID     json.RawMessage `json:"id"`
						Method string          `json:"method"`
					}
					_ = json.Unmarshal(body, &m)
					if m.Method != "initialize" {
						w.WriteHeader(http.StatusAccepted)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Mcp-Session-Id", "s1")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
				default:
					w.WriteHeader(http.StatusMethodNotAllowed)
				}
			}))
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL + "/mcp", Headers: map[string]string{"x-api-key": "k"}}), client.Options{Name: "t", Protocol: "legacy"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			testwait.Until(t, "the client to open its GET stream", func() bool { return redirected.Load() != 0 })
			if !tc.crossOrig {
				testwait.Until(t, "the same-origin redirect of the GET stream to be followed", func() bool { return streamed.Load() != 0 })
				if streamKey.Load() != "k" {
					t.Fatalf("the same-origin redirect of the GET stream was not followed with the headers (streamed %d, X-Api-Key %v)", streamed.Load(), streamKey.Load())
				}
				return
			}
			// A negative check: nothing may reach the other origin. A wait
			// cut short by load only misses a failure, never makes one.
			time.Sleep(300 * time.Millisecond)
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the GET stream followed a redirect to another origin (%d requests there)", n)
			}
		})
	}
}
