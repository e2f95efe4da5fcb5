package core

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// TestSessionCallReadsParamsOnce counts how often a session tools/call's
// params are read after the parse, as the streamable transport drives it
// (Decide, then Handle): at most twice, once of them to forward (issue 28:
// read once, hand the view down). Run with -tags rawjsoncount.
func TestSessionCallReadsParamsOnce(t *testing.T) {
	if !rawjson.CountingEnabled {
		t.Skip("counts reads only when built with -tags rawjsoncount")
	}
	c, rte, _ := benchCore(t)
	sess := NewSession("s1", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
	ctx := context.Background()
	call := func() (*jsonrpc.Message, *rawjson.Counter, int) {
		msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall,
			json.RawMessage(`{"name":"up__echo","arguments":{"text":"hi"},"_meta":{"progressToken":7}}`))
		n := rawjson.Watch(msg.Params)
		defer n.Stop()
		p := mcp.ReadParams(msg.Method, msg.Params) // the edge's one reading, right after the parse
		viewed := n.Reads()
		v := c.DecideParams(ctx, rte, msg, p)
		resp := c.Handle(ctx, sess, msg, v, nil)
		return resp, n, viewed
	}
	call() // the first call lists the upstream's tools
	resp, n, viewed := call()
	reads := n.Reads() - viewed
	if resp.Error != nil {
		t.Fatalf("call: %v", resp.Error)
	}
	t.Logf("a session tools/call read its params %d times after the parse and its view (%d for the view)", reads, viewed)
	if reads > 2 {
		t.Errorf("a session tools/call read its params %d times after the parse, want at most 2: %q", reads, n.Sites())
	}
}

// TestSessionCallResolvesItsTargetOnce: a tools/call's target is resolved
// once (pinning, in Decide), and the policy's name, the limits, the audit
// and the forward take that resolution (issue 28). Before, pinning,
// Canonical and ForwardTarget each resolved it, and the limits and the
// audit once more each.
func TestSessionCallResolvesItsTargetOnce(t *testing.T) {
	c, rte, _ := benchCore(t)
	rte.Gen.Limiter = policy.NewLimiter(&config.RateLimits{Principal: &config.RateLimit{Rate: config.Rate{N: 1000, Per: time.Second}}})
	rte.Gen.Audit = audit.New(zap.NewNop(), audit.Options{})
	sess := NewSession("s1", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
	ctx := context.Background()
	call := func() (*jsonrpc.Message, int64) {
		before := rte.View.Resolutions()
		msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"up__echo","arguments":{"text":"hi"}}`))
		resp := c.Handle(ctx, sess, msg, nil, nil)
		return resp, rte.View.Resolutions() - before
	}
	call() // the first call lists the upstream's tools
	resp, n := call()
	if resp.Error != nil {
		t.Fatalf("call: %v", resp.Error)
	}
	if n != 1 {
		t.Errorf("the target was resolved %d times, want once", n)
	}
}
