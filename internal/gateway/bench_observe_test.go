package gateway_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// BenchmarkToolsCallObserved is BenchmarkToolsCallRawHTTP's stdio path
// with what operators turn on: metrics (per route, method and tool), then
// tracing too (every span recorded, batched to an exporter that drops
// them). The "off" case has neither; compare its allocs/op with
// BenchmarkToolsCallRawHTTP to see that tracing off costs nothing.
func BenchmarkToolsCallObserved(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  beta:\n    command: [%q]\n    env: {MCPGW_TEST_STDIO_SERVER: beta}\n", exe)
	for _, mode := range []string{"off", "metrics", "metrics+tracing"} {
		var opts gateway.Options
		if mode != "off" {
			opts.Metrics = metrics.New(prometheus.NewRegistry(), metrics.Options{NoRuntimeCollectors: true})
		}
		if mode == "metrics+tracing" {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			opts.TracerProvider = tp
		}
		url := benchObservedGateway(b, yaml, opts)
		benchRawPath(b, mode, url, "application/json", "beta__echo", "beta:hi")
	}
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

func benchObservedGateway(b *testing.B, yaml string, opts gateway.Options) string {
	b.Helper()
	cfg, err := config.Parse("bench.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	opts.Logger, opts.Listener = zap.NewNop(), ln
	opts.Getenv = func(string) (string, bool) { return "", false }
	gw, err := gateway.Start(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = gw.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gw.Host().WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	return "http://" + ln.Addr().String() + "/mcp"
}
