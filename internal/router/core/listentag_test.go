package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// A listen stream's subscription id is set before the stream is
// registered: the list-change coalescer, which reads it to tag what it
// sends, may run at any moment after registration (under -race, setting
// it after AddListener was a data race the gateway's reload tests hit).
func TestListenTaggedBeforeRegistered(t *testing.T) {
	c, routes := capabilityFixture(t)
	rte := routes["/rich"]
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // list changes arriving throughout, from another goroutine
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				c.ListChanged("rich", mcp.NotificationToolsListChanged)
			}
		}
	}()
	defer func() { close(stop); <-done }()

	ctx := context.Background()
	s := NewRequestSession(ctx, rte, mcp.Version20260728, json.RawMessage(`{}`), nil, "", "", true)
	defer s.End()
	params := json.RawMessage(`{"notifications":{"toolsListChanged":true}}`)
	_, end, jerr := c.OpenListen(ctx, s, jsonrpc.NewRequest(jsonrpc.ID(`"L1"`), mcp.MethodSubscriptionsListen, params))
	if jerr != nil {
		t.Fatal(jerr)
	}
	defer end()
	b := testwait.Recv(t, s.Outbox(), "a tools list_changed on the listen stream")
	if !strings.Contains(string(b), `"L1"`) {
		t.Errorf("list change without the stream's subscription id: %s", b)
	}
}
