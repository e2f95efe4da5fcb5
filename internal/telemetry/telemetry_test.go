package telemetry_test

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Settings come from tracing: when present, else from the standard OTEL_*
// variables; off unless one of them asks; bad variables name themselves.
func TestResolve(t *testing.T) {
	ratio := 0.5
	for _, tc := range []struct {
		name string
		cfg  *config.Tracing
		env  map[string]string
		want *telemetry.Settings // nil: off
		err  string
	}{
		{name: "off by default", env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{name: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "env: exporter and endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			want: &telemetry.Settings{Protocol: config.TracingHTTP, Endpoint: "http://collector:4318/v1/traces", Sampler: telemetry.SamplerParentAlwaysOn, Ratio: 1, ServiceName: "mcpgw", Source: "environment"}},
		{name: "env: endpoint alone", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c/custom", "OTEL_SERVICE_NAME": "gw-eu"},
			want: &telemetry.Settings{Protocol: config.TracingHTTP, Endpoint: "https://c/custom", Sampler: telemetry.SamplerParentAlwaysOn, Ratio: 1, ServiceName: "gw-eu", Source: "environment"}},
		{name: "env: grpc, insecure host:port, headers, sampler", env: map[string]string{
			"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317",
			"OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x=1",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1",
			"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment=prod",
		}, want: &telemetry.Settings{Protocol: config.TracingGRPC, Endpoint: "http://c:4317", Headers: map[string]string{"api-key": "a b", "x": "1"},
			Sampler: telemetry.SamplerParentRatio, Ratio: 0.1, ServiceName: "from-attrs", Source: "environment"}},
		{name: "env: defaults to localhost", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			want: &telemetry.Settings{Protocol: config.TracingHTTP, Endpoint: "http://localhost:4318/v1/traces", Sampler: telemetry.SamplerParentAlwaysOn, Ratio: 1, ServiceName: "mcpgw", Source: "environment"}},
		{name: "config wins", cfg: &config.Tracing{Endpoint: "otel:4318", Insecure: true, Protocol: config.TracingHTTP, SamplingRatio: &ratio, ServiceName: "mcpgw"},
			env:  map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://elsewhere:4318"},
			want: &telemetry.Settings{Protocol: config.TracingHTTP, Endpoint: "http://otel:4318/v1/traces", Sampler: telemetry.SamplerParentRatio, Ratio: 0.5, ServiceName: "mcpgw", Source: "config"}},
		{name: "config grpc over TLS", cfg: &config.Tracing{Endpoint: "otel:4317", Protocol: config.TracingGRPC, ServiceName: "mcpgw"},
			want: &telemetry.Settings{Protocol: config.TracingGRPC, Endpoint: "https://otel:4317", Sampler: telemetry.SamplerParentRatio, Ratio: 1, ServiceName: "mcpgw", Source: "config"}},
		{name: "disabled", cfg: &config.Tracing{Endpoint: "http://otel:4318"}, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin": mcpgw exports traces over OTLP only`},
		{name: "bad protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, err: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json": use http/protobuf or grpc`},
		{name: "bad sampler arg", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: `OTEL_TRACES_SAMPLER_ARG="2": give a ratio from 0 to 1`},
		{name: "bad headers", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, err: `OTEL_EXPORTER_OTLP_HEADERS: "novalue" is not key=value`},
		{name: "bad endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://x"}, err: `OTEL_EXPORTER_OTLP_ENDPOINT="ftp://x" is not an http(s) URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := telemetry.Resolve(tc.cfg, envOf(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if got == nil {
				return
			}
			got.Attributes = nil
			if got.Protocol != tc.want.Protocol || got.Endpoint != tc.want.Endpoint || got.Sampler != tc.want.Sampler ||
				got.Ratio != tc.want.Ratio || got.ServiceName != tc.want.ServiceName || got.Source != tc.want.Source ||
				len(got.Headers) != len(tc.want.Headers) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			for k, v := range tc.want.Headers {
				if got.Headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, got.Headers[k], v)
				}
			}
		})
	}
}

func TestTraceparentRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false}, // zero trace id
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // upper case
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false},
		{"", false},
	} {
		sc, ok := telemetry.RemoteContext(tc.in, "")
		if ok != tc.ok {
			t.Errorf("RemoteContext(%q) ok = %v", tc.in, ok)
			continue
		}
		if ok && telemetry.Traceparent(sc) != tc.in {
			t.Errorf("round trip of %q: %q", tc.in, telemetry.Traceparent(sc))
		}
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		method string
		kind   mcp.Kind
		name   string
		want   string
	}{
		{"tools/call", mcp.KindTool, "gh__search", "tools/call gh__search"},
		{"prompts/get", mcp.KindPrompt, "greet", "prompts/get greet"},
		{"resources/read", mcp.KindResource, "file:///etc/passwd", "resources/read"}, // URIs stay out of names
		{"tools/list", "", "", "tools/list"},
	} {
		if got := telemetry.SpanName(tc.method, tc.kind, tc.name); got != tc.want {
			t.Errorf("SpanName(%s, %s) = %q, want %q", tc.method, tc.name, got, tc.want)
		}
	}
	if h := telemetry.SessionID("abc"); len(h) != 32 || strings.Contains(h, "abc") || telemetry.SessionID("") != "" {
		t.Errorf("SessionID = %q", h)
	}
}

// A provider exports through its exporter; a nil one (tracing off) gives
// no tracer.
func TestProvider(t *testing.T) {
	var off *telemetry.Provider
	if off.Tracer("v") != nil || off.Shutdown(context.Background()) != nil {
		t.Fatal("a nil provider should be off")
	}
	exp := tracetest.NewInMemoryExporter()
	p, err := telemetry.New(context.Background(), &telemetry.Settings{Protocol: config.TracingHTTP, Endpoint: "http://127.0.0.1:1/v1/traces", Sampler: telemetry.SamplerAlwaysOn, ServiceName: "svc"},
		telemetry.Options{Version: "v9", Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer("v9").Start(context.Background(), "x", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	if err := p.TracerProvider().(*sdktrace.TracerProvider).ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans() // Shutdown would clear them
	defer func() { _ = p.Shutdown(context.Background()) }()
	if len(spans) != 1 || spans[0].Name != "x" {
		t.Fatalf("exported %+v", spans)
	}
	var svc, ver string
	for _, kv := range spans[0].Resource.Attributes() {
		switch kv.Key {
		case "service.name":
			svc = kv.Value.AsString()
		case "service.version":
			ver = kv.Value.AsString()
		}
	}
	if svc != "svc" || ver != "v9" || spans[0].InstrumentationScope.Name != telemetry.ScopeName {
		t.Errorf("resource service %q version %q, scope %q", svc, ver, spans[0].InstrumentationScope.Name)
	}
}
