package gateway_test

// Sampling in the middle of a tools/call, the four ways a gateway can meet
// it: legacy client and legacy upstream (a server→client request relayed on
// the call's stream), 2026 client and legacy upstream (bridged: the
// upstream call is parked, input_required returned, the retry answers it),
// legacy client and 2026 upstream (the gateway answers input_required
// through a relayed request and retries upstream), and, for reference, a
// 2026 client straight to a 2026 upstream (no gateway). Run with
//
//	go test -run '^$' -bench Sampling -benchtime 500x -count 5 ./internal/gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

func benchSamplingClient(tb testing.TB, url, version string) *mcp.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-sampler", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "four"}}, nil
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: benchHTTPClient(), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

func benchMatrixUpstream(tb testing.TB, modern bool) string {
	tb.Helper()
	srv := gatewaytest.MatrixServer(modern)
	var opts *mcp.StreamableHTTPOptions
	if modern {
		opts = &mcp.StreamableHTTPOptions{Stateless: true}
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
	tb.Cleanup(ts.Close)
	return ts.URL
}

func BenchmarkSampling(b *testing.B) {
	legacyUp := benchMatrixUpstream(b, false)
	modernUp := benchMatrixUpstream(b, true)
	_, viaLegacy := benchStartGateway(b, "listen: 127.0.0.1:0\nupstreams:\n  up:\n    url: "+legacyUp+"\n")
	_, viaModern := benchStartGateway(b, "listen: 127.0.0.1:0\nupstreams:\n  up:\n    url: "+modernUp+"\n    protocol: \"2026\"\n")
	for _, p := range []struct{ name, url, version, tool string }{
		{"legacy-client/legacy-upstream", viaLegacy, "2025-11-25", "up__ask"},
		{"2026-client/legacy-upstream", viaLegacy, "2026-07-28", "up__ask"},
		{"legacy-client/2026-upstream", viaModern, "2025-11-25", "up__ask"},
		{"2026-client/2026-upstream-direct", modernUp, "2026-07-28", "ask"},
	} {
		cs := benchSamplingClient(b, p.url, p.version)
		call := func() error {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: p.tool, Arguments: map[string]any{"kind": "sampling"}})
			if err != nil {
				return err
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "sampled four") {
				b.Fatalf("%s: %+v", p.name, res.Content)
			}
			return nil
		}
		b.Run(p.name, func(b *testing.B) {
			benchWarm(b, call)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
