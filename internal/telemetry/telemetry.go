// Package telemetry owns mcpgw's OpenTelemetry tracing: the settings (the
// config's tracing: section or the standard OTEL_* variables, settings.go),
// the TracerProvider and its OTLP exporter (HTTP or gRPC), and the names
// and attributes of the spans the router and the upstream clients make
// (spans.go), after the OpenTelemetry semantic conventions for MCP and
// GenAI. Nothing here is global: the gateway builds one Provider and hands
// its tracer down; with tracing off there is no provider and no span is
// made at all.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
)

// ScopeName is the instrumentation scope of mcpgw's spans.
const ScopeName = "github.com/mcpgw/mcpgw"

// Options configure New.
type Options struct {
	Logger *zap.Logger
	// Version is reported as service.version and the scope's version.
	Version string
	// Exporter replaces the OTLP exporter (tests).
	Exporter sdktrace.SpanExporter
}

// Provider is a running TracerProvider with its exporter.
type Provider struct {
	tp       *sdktrace.TracerProvider
	settings *Settings
}

// New starts the provider for s: spans are batched and exported in the
// background (the batch queue is bounded: a receiver that cannot keep up
// loses spans, never slows requests), and export failures are logged at
// most once a minute.
func New(ctx context.Context, s *Settings, opts Options) (*Provider, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	exp := opts.Exporter
	if exp == nil {
		var err error
		if exp, err = newExporter(ctx, s); err != nil {
			return nil, err
		}
	}
	attrs := append([]attribute.KeyValue{
		attribute.String("service.name", s.ServiceName),
		attribute.String("service.version", opts.Version),
	}, s.Attributes...)
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler(s)),
		sdktrace.WithBatcher(&loggingExporter{SpanExporter: exp, log: opts.Logger, every: time.Minute}),
	)
	return &Provider{tp: tp, settings: s}, nil
}

// sampler builds the sampler s names.
func sampler(s *Settings) sdktrace.Sampler {
	switch s.Sampler {
	case SamplerAlwaysOn:
		return sdktrace.AlwaysSample()
	case SamplerAlwaysOff:
		return sdktrace.NeverSample()
	case SamplerRatio:
		return sdktrace.TraceIDRatioBased(s.Ratio)
	case SamplerParentAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case SamplerParentRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.Ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

func newExporter(ctx context.Context, s *Settings) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("tracing: endpoint %q: %w", s.Endpoint, err)
	}
	var client otlptrace.Client
	switch s.Protocol {
	case config.TracingGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(s.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(s.Headers))
		}
		client = otlptracegrpc.NewClient(opts...)
	default:
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(s.Endpoint)}
		if len(s.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(s.Headers))
		}
		client = otlptracehttp.NewClient(opts...)
	}
	// New connects lazily: an unreachable receiver is an export error
	// later, never a reason not to start.
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", s.Endpoint, err)
	}
	return exp, nil
}

// Tracer is the tracer of mcpgw's spans; nil for a nil Provider (tracing
// off), which callers take as "make no span".
func (p *Provider) Tracer(version string) trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version))
}

// TracerProvider is the SDK provider (nil for a nil Provider).
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.tp
}

// Settings are the settings the provider runs with.
func (p *Provider) Settings() *Settings {
	if p == nil {
		return nil
	}
	return p.settings
}

// Shutdown exports what is still queued (bounded by ctx) and stops.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// loggingExporter logs export failures on the gateway's logger (at most
// one line per interval, with the count of the others) instead of
// OpenTelemetry's global error handler.
type loggingExporter struct {
	sdktrace.SpanExporter
	log   *zap.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time
	dropped int // failures not logged since last
}

func (e *loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	e.mu.Lock()
	now := time.Now()
	if now.Sub(e.last) < e.every {
		e.dropped++
		e.mu.Unlock()
		return nil
	}
	skipped := e.dropped
	e.last, e.dropped = now, 0
	e.mu.Unlock()
	e.log.Warn("tracing: spans could not be exported; check that the OTLP receiver (tracing.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT) is up and reachable",
		zap.Int("spans", len(spans)), zap.Int("failures_not_logged", skipped), zap.Error(err))
	return nil // logged here; the batch is dropped, requests never wait for it
}
