package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
)

// pollingUpstream is a 2025-11-25 server that answers tools/call the
// polling way (SEP-1699): the POST's event stream carries only a priming
// event (an id and, optionally, "retry:") and is closed; the answer comes on
// the GET that resumes it with Last-Event-ID.
type pollingUpstream struct {
	retry string // the priming event's "retry:" value, "" for none

	mu       sync.Mutex
	closedAt time.Time
	resumeAt time.Time
	lastID   string
	callID   json.RawMessage
	resumes  int
}

func (u *pollingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		last := r.Header.Get("Last-Event-ID")
		if last == "" {
			http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
			return
		}
		u.mu.Lock()
		u.resumeAt, u.lastID, u.resumes = time.Now(), last, u.resumes+1
		id := u.callID
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", id)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	w.Header().Set("Mcp-Session-Id", "s1")
	switch m.Method {
	case "initialize":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"polling","version":"1"}}}`, m.ID)
	case "tools/call":
		u.mu.Lock()
		u.callID = m.ID
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		prime := "id: e1\n"
		if u.retry != "" {
			prime += "retry: " + u.retry + "\n"
		}
		fmt.Fprint(w, prime+"data: \n\n")
		w.(http.Flusher).Flush()
		u.mu.Lock()
		u.closedAt = time.Now()
		u.mu.Unlock()
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// TestResumeHonoursRetry: a response stream closed before its answer is
// resumed with GET and Last-Event-ID no sooner than the server's "retry:"
// asks (the conformance suite's sse-retry scenario); without one, after the
// client's own first backoff (250 ms); and a server asking for more than
// mcpgw waits is not resumed early, so the call ends at its timeout.
func TestResumeHonoursRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		retry    string
		minWait  time.Duration
		resumed  bool
		deadline time.Duration
	}{
		{name: "server retry", retry: "400", minWait: 400 * time.Millisecond, resumed: true, deadline: 5 * time.Second},
		{name: "no retry", minWait: 250 * time.Millisecond, resumed: true, deadline: 5 * time.Second},
		{name: "retry beyond the bound", retry: "3600000", resumed: false, deadline: 700 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &pollingUpstream{retry: tc.retry}
			ts := httptest.NewServer(up)
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "t", Protocol: "legacy"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cctx, ccancel := context.WithTimeout(ctx, tc.deadline)
			defer ccancel()
			resp, err := c.Call(cctx, "tools/call", json.RawMessage(`{"name":"slow"}`), client.CallOptions{})
			up.mu.Lock()
			defer up.mu.Unlock()
			if !tc.resumed {
				if err == nil || up.resumes != 0 {
					t.Fatalf("call = %v, %v with %d resumes; want a timeout and no GET", resp, err, up.resumes)
				}
				return
			}
			if err != nil || resp.Error != nil || !strings.Contains(string(resp.Result), "content") {
				t.Fatalf("call = %+v, %v; want the answer from the resumed stream", resp, err)
			}
			if up.lastID != "e1" {
				t.Errorf("Last-Event-ID = %q, want e1 (the priming event's id)", up.lastID)
			}
			if waited := up.resumeAt.Sub(up.closedAt); waited < tc.minWait {
				t.Errorf("resumed %v after the stream closed, want at least %v", waited, tc.minWait)
			}
		})
	}
}
