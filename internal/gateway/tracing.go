package gateway

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// tracingFlushTimeout bounds how long Shutdown waits to export the last
// spans to a receiver that may be gone.
const tracingFlushTimeout = 5 * time.Second

// startTracing builds the tracer of cfg (the tracing: section, else the
// OTEL_* environment): Options.TracerProvider when given, else an OTLP
// provider the gateway owns and Shutdown flushes. Off, it returns nil and
// the router makes no spans.
func startTracing(cfg *config.Config, opts Options, red *redactor) (*telemetry.Provider, trace.Tracer, error) {
	if tp := opts.TracerProvider; tp != nil {
		return nil, tp.Tracer(telemetry.ScopeName, trace.WithInstrumentationVersion(opts.Version)), nil
	}
	env := opts.Getenv
	if env == nil {
		env = os.LookupEnv
	}
	s, err := telemetry.Resolve(cfg.Tracing, env)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	if s == nil {
		return nil, nil, nil
	}
	red.add(s.Secrets()) // OTEL_EXPORTER_OTLP_HEADERS values are secrets too
	p, err := telemetry.New(context.Background(), s, telemetry.Options{Logger: opts.Logger.Named("tracing"), Version: opts.Version})
	if err != nil {
		return nil, nil, err
	}
	endpoint := s.Endpoint
	if u, err := url.Parse(endpoint); err == nil {
		endpoint = u.Redacted()
	}
	opts.Logger.Info("tracing on: spans are exported over OTLP", zap.String("endpoint", endpoint), zap.String("protocol", s.Protocol),
		zap.String("sampler", s.Sampler), zap.Float64("ratio", s.Ratio), zap.String("service_name", s.ServiceName), zap.String("from", s.Source))
	return p, p.Tracer(opts.Version), nil
}

// stopTracing exports the spans still queued and stops the provider.
func stopTracing(p *telemetry.Provider, log *zap.Logger) {
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("tracing: the last spans could not be exported", zap.Error(err))
	}
}
