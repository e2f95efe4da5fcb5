package core

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/policy/policytest"
	"github.com/mcpgw/mcpgw/internal/principal"
)

// BenchmarkHandleGuardedCall is BenchmarkHandleCall by an authenticated
// principal under a 1,000-rule policy whose rules carry CEL conditions
// (bench scenario 4's policy): what the guard adds to a call.
func BenchmarkHandleGuardedCall(b *testing.B) {
	c, rte, _ := benchCore(b)
	y := "upstreams: {up: {url: 'https://up.example.com'}}\nauth: {api_keys: [{name: k, key: s}]}\n" +
		policytest.Large{Rules: 1000, When: true, Grant: 500, GrantPrefix: "up__"}.YAML()
	cfg, err := config.Parse("bench.yaml", []byte(y), nil)
	if err != nil {
		b.Fatal(err)
	}
	if rte.Gen.Policy, err = policy.Compile(cfg.Policy); err != nil {
		b.Fatal(err)
	}
	claims := map[string]any{"sub": "alice", "tenant": "acme"}
	p := &auth.Principal{Subject: "alice", Issuer: "https://idp.example.com", Groups: []string{"team500", "team7"}, Claims: claims, PreparedClaims: principal.NewClaims(claims)}
	ctx := auth.WithPrincipal(context.Background(), p)
	sess := NewSession("s1", rte, mcp.Version20251125, json.RawMessage(`{}`), nil, nil)
	msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, json.RawMessage(`{"name":"up__echo","arguments":{"text":"hi"}}`))
	if resp := c.Handle(ctx, sess, msg, nil, nil); resp.Error != nil || string(resp.Result) != `{"content":[{"type":"text","text":"echo:hi"}]}` {
		b.Fatalf("answer %s %v", resp.Result, resp.Error)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Handle(ctx, sess, msg, nil, nil)
	}
}
