package client

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/memhttp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// sentUpstream answers every POST 202 and records the Mcp-* headers of each.
type sentUpstream struct {
	mu      sync.Mutex
	headers []http.Header
}

func (u *sentUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.headers = append(u.headers, r.Header.Clone())
	u.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (u *sentUpstream) last() http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers[len(u.headers)-1]
}

// TestStreamableSendsWhatItIsTold (issue 28): a message the client made
// goes out by what the client knows of it — its id, the request a
// cancellation ends, the Mcp-Method and Mcp-Name it mirrors — and the
// transport does not read the bytes it was just handed again.
func TestStreamableSendsWhatItIsTold(t *testing.T) {
	up := &sentUpstream{}
	s := NewStreamable(HTTPConfig{URL: "http://up.test/mcp", Client: memhttp.Client(up)})
	if err := s.Start(context.Background(), func([]byte, jsonrpc.ID) bool { return true }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.setProtocolVersion(mcp.Version20260728) // mirrors Mcp-Method and Mcp-Name
	params := []byte(`{"name":"echo","arguments":{}}`)
	msg, _ := jsonrpc.Encode(jsonrpc.NewRequest(jsonrpc.IntID(4), mcp.MethodToolsCall, params))
	n := rawjson.Watch(msg)
	defer n.Stop()
	if err := s.sendKnown(context.Background(), msg, requestSent(mcp.MethodToolsCall, jsonrpc.IntID(4), params, "echo")); err != nil {
		t.Fatal(err)
	}
	if h := up.last(); h.Get(mcp.HeaderMethod) != mcp.MethodToolsCall || h.Get(mcp.HeaderName) != "echo" {
		t.Errorf("mirrored %q %q, want tools/call echo", h.Get(mcp.HeaderMethod), h.Get(mcp.HeaderName))
	}
	if rawjson.CountingEnabled && n.Reads() != 0 {
		t.Errorf("the transport read the message it was handed %d times: %q", n.Reads(), n.Sites())
	}
	// What it is told is what goes out: the bytes are not asked.
	if err := s.sendKnown(context.Background(), msg, Sent{Method: mcp.MethodToolsCall, ID: jsonrpc.IntID(4), Name: "told", HasName: true}); err != nil {
		t.Fatal(err)
	}
	if h := up.last(); h.Get(mcp.HeaderName) != "told" {
		t.Errorf("mirrored Mcp-Name %q, want the name it was told", h.Get(mcp.HeaderName))
	}
	// Send, for a message nobody describes, reads it as before.
	if err := s.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	if h := up.last(); h.Get(mcp.HeaderName) != "echo" {
		t.Errorf("Send mirrored Mcp-Name %q, want echo", h.Get(mcp.HeaderName))
	}
}
