package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// This file holds the tracing: section (types, defaults, validation) and
// the admin listener's operator settings; internal/telemetry builds the
// OpenTelemetry exporter from it (and from the standard OTEL_* variables
// when the section is absent).

// Tracing protocols (OTLP transports).
const (
	TracingHTTP = "http/protobuf" // the OTLP default; port 4318
	TracingGRPC = "grpc"          // port 4317
)

// Tracing defaults and bounds.
const (
	DefaultTracingServiceName = "mcpgw"
	// DefaultMaxMetricNames bounds the tool, prompt and resource label
	// values of the per-name metrics (each kind apart); names past it are
	// counted as "other".
	DefaultMaxMetricNames = 200
	MaxMaxMetricNames     = 10000
)

// Tracing configures OpenTelemetry tracing: a server span per downstream
// request and a client span per upstream call, exported over OTLP.
type Tracing struct {
	// Endpoint is the OTLP receiver: http(s)://host:port[/path] or
	// host:port (TLS unless Insecure). For http/protobuf a URL without a
	// path gets /v1/traces.
	Endpoint string `yaml:"endpoint"`
	// Protocol is http/protobuf (default) or grpc.
	Protocol string `yaml:"protocol"`
	// SamplingRatio is the share of new traces recorded, 0 to 1 (default
	// 1); a request whose caller sent a traceparent follows the caller's
	// sampled flag.
	SamplingRatio *float64 `yaml:"sampling_ratio"`
	// Headers are sent with every export (credentials from ${ENV}).
	Headers map[string]string `yaml:"headers"`
	// Insecure exports without TLS to a host:port endpoint (an http://
	// URL is plaintext already).
	Insecure bool `yaml:"insecure"`
	// ServiceName is the service.name resource attribute (default mcpgw).
	ServiceName string `yaml:"service_name"`
}

// Ratio is the sampling ratio in force (default 1).
func (t *Tracing) Ratio() float64 {
	if t == nil || t.SamplingRatio == nil {
		return 1
	}
	return *t.SamplingRatio
}

func tracingDefaults(c *Config, d *strictyaml.Decoder) {
	if a := c.Admin; a != nil && !d.Set("admin.max_metric_names") {
		a.MaxMetricNames = DefaultMaxMetricNames
	}
	t := c.Tracing
	if t == nil {
		return
	}
	if !d.Set("tracing.protocol") {
		t.Protocol = TracingHTTP
	}
	if !d.Set("tracing.service_name") {
		t.ServiceName = DefaultTracingServiceName
	}
}

// MaxNames is admin.max_metric_names, or its default without admin:.
func (a *Admin) MaxNames() int {
	if a == nil || a.MaxMetricNames <= 0 {
		return DefaultMaxMetricNames
	}
	return a.MaxMetricNames
}

func (v *validator) tracing() {
	if a := v.cfg.Admin; a != nil && (a.MaxMetricNames < 1 || a.MaxMetricNames > MaxMaxMetricNames) {
		v.add("admin.max_metric_names", fmt.Sprintf("%d is out of range; give 1 to %d (default %d)", a.MaxMetricNames, MaxMaxMetricNames, DefaultMaxMetricNames))
	}
	t := v.cfg.Tracing
	if t == nil {
		return
	}
	switch t.Protocol {
	case TracingHTTP, TracingGRPC:
	case "http", "http/json":
		v.add("tracing.protocol", fmt.Sprintf("%q is not supported; use %s (OTLP over HTTP, port 4318) or %s (port 4317)", t.Protocol, TracingHTTP, TracingGRPC))
	default:
		v.add("tracing.protocol", fmt.Sprintf("%q is not an OTLP protocol; use %s (default, port 4318) or %s (port 4317)", t.Protocol, TracingHTTP, TracingGRPC))
	}
	if r := t.SamplingRatio; r != nil && (*r < 0 || *r > 1) {
		v.add("tracing.sampling_ratio", fmt.Sprintf("%v is not a ratio; give 0 to 1 (0.1 records one new trace in ten; default 1)", *r))
	}
	if strings.TrimSpace(t.ServiceName) == "" {
		v.add("tracing.service_name", "is empty; remove it for the default (mcpgw) or name the service")
	}
	for k := range t.Headers {
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r == ':' || r >= 0x7f }) {
			v.add("tracing.headers", fmt.Sprintf("%q is not an HTTP header name; use e.g. Authorization", k))
		}
	}
	v.tracingEndpoint(t)
}

// tracingEndpoint checks tracing.endpoint: an http(s) URL, or host:port.
func (v *validator) tracingEndpoint(t *Tracing) {
	const p = "tracing.endpoint"
	example := "http://127.0.0.1:4318"
	if t.Protocol == TracingGRPC {
		example = "http://127.0.0.1:4317"
	}
	e := t.Endpoint
	if e == "" {
		v.add(p, "is not set; give the OTLP receiver, e.g. "+example+" (or remove tracing: and set OTEL_EXPORTER_OTLP_ENDPOINT)")
		return
	}
	if !strings.Contains(e, "://") {
		if _, _, err := net.SplitHostPort(e); err != nil {
			v.add(p, fmt.Sprintf("%q is neither a URL nor host:port; write e.g. %s", e, example))
		}
		return
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(p, fmt.Sprintf("%q is not an http(s) URL; write e.g. %s", e, example))
		return
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		v.add(p, fmt.Sprintf("%q has credentials, a query or a fragment; put credentials in tracing.headers", u.Redacted()))
	}
	if t.Protocol == TracingGRPC && u.Path != "" && u.Path != "/" {
		v.add(p, fmt.Sprintf("%q has a path, which OTLP over gRPC does not use; give scheme, host and port", e))
	}
	if u.Scheme == "https" && t.Insecure {
		v.add("tracing.insecure", "contradicts the https:// endpoint; remove insecure, or use http:// for a plaintext receiver")
	}
}
