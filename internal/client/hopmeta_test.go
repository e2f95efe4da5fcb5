package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
)

// TestOlderCallerHopMetaReplaced: a session (older) caller's own
// io.modelcontextprotocol/* keys in _meta do not reach a stateless
// upstream as its hop metadata: the upstream gets the gateway's version,
// client info and the capabilities the call declares. A 2026-07-28
// caller's own are passed on (PassInputRequired).
func TestOlderCallerHopMetaReplaced(t *testing.T) {
	var mu sync.Mutex
	var metas []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "server/discover":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`, m.ID)
		case "tools/call":
			mu.Lock()
			metas = append(metas, string(m.Params.Meta))
			mu.Unlock()
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[]}}`, m.ID)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Modern() {
		t.Fatal("want a 2026-07-28 connection")
	}
	forged := json.RawMessage(`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"k":1}}`)
	if _, err := c.Call(ctx, "tools/call", forged, client.CallOptions{Capabilities: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, "tools/call", forged, client.CallOptions{PassInputRequired: true}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(metas) != 2 {
		t.Fatalf("calls seen: %v", metas)
	}
	var older map[string]json.RawMessage
	if err := json.Unmarshal([]byte(metas[0]), &older); err != nil {
		t.Fatal(err)
	}
	if got := string(older["io.modelcontextprotocol/clientCapabilities"]); got != `{}` {
		t.Errorf("an older caller's call declared capabilities %s upstream; want the ones the call declares, {}", got)
	}
	if string(older["k"]) != "1" || older["io.modelcontextprotocol/clientInfo"] == nil {
		t.Errorf("_meta %s: want the payload key kept and the gateway's client info", metas[0])
	}
	if want := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"k":1}`; metas[1] != want {
		t.Errorf("a 2026-07-28 caller's _meta became %s; want it as sent", metas[1])
	}
}
