package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// BenchmarkInteractivePlacement is what placing a call costs on a stdio
// or legacy SSE upstream: a caller that cannot be asked (the fast path,
// which every call of such a caller takes), and one that can, alone on
// the shared connection.
func BenchmarkInteractivePlacement(b *testing.B) {
	h, _ := askingHost(b, prometheus.NewRegistry(), zap.NewNop(), nil)
	defer h.Close()
	u := h.Upstream("u")
	params := json.RawMessage(`{"name":"t","arguments":{"text":"hi"}}`)
	for _, bc := range []struct {
		name string
		caps string
	}{
		{"cannot-be-asked", `{"roots":{"listChanged":true}}`},
		{"asking-alone", `{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{}}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := host.WithCallerCapabilities(context.Background(), json.RawMessage(bc.caps))
			shared, err := u.Client(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				c, release, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
				if err != nil || c != shared {
					b.Fatal(c == shared, err)
				}
				release()
			}
		})
	}
}
