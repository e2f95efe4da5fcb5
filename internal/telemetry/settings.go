package telemetry

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/mcpgw/mcpgw/internal/config"
)

// Settings are the tracing settings in force: from the config's tracing:
// section, or else from the standard OTEL_* environment variables.
type Settings struct {
	// Protocol is config.TracingHTTP or config.TracingGRPC.
	Protocol string
	// Endpoint is the whole URL of the export (scheme, host, port and, for
	// HTTP, path).
	Endpoint string
	// Headers are sent with every export.
	Headers map[string]string
	// Sampler names the sampler (OTEL_TRACES_SAMPLER's values) and Ratio
	// its argument for the traceidratio ones.
	Sampler string
	Ratio   float64
	// ServiceName and Attributes describe this process (the resource).
	ServiceName string
	Attributes  []attribute.KeyValue
	// Source says where the settings came from, for the log: "config"
	// (tracing:) or "environment" (OTEL_*).
	Source string
}

// Samplers (the values of OTEL_TRACES_SAMPLER).
const (
	SamplerAlwaysOn             = "always_on"
	SamplerAlwaysOff            = "always_off"
	SamplerRatio                = "traceidratio"
	SamplerParentAlwaysOn       = "parentbased_always_on"
	SamplerParentAlwaysOff      = "parentbased_always_off"
	SamplerParentRatio          = "parentbased_traceidratio"
	defaultHTTPEndpoint         = "http://localhost:4318"
	defaultGRPCEndpoint         = "http://localhost:4317"
	httpTracesPath              = "/v1/traces"
	envPrefix                   = "OTEL_EXPORTER_OTLP_"
	envTracesPrefix             = "OTEL_EXPORTER_OTLP_TRACES_"
	maxResourceAttributesLength = 4096
)

// Secrets are the header values, which the gateway's log scrubs like the
// config's own secrets.
func (s *Settings) Secrets() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, v := range s.Headers {
		if len(v) >= config.MinSecretLen {
			out = append(out, v)
		}
		if _, cred, ok := strings.Cut(v, " "); ok && len(cred) >= config.MinSecretLen {
			out = append(out, cred)
		}
	}
	return out
}

// Resolve returns the tracing settings of cfg (the config's tracing:
// section, nil when absent) and env, or nil when tracing is off. The
// section wins over the environment; OTEL_SDK_DISABLED=true turns tracing
// off either way. Without the section, OTEL_TRACES_EXPORTER=otlp turns it on
// (an OTLP endpoint variable alone does too, unless OTEL_TRACES_EXPORTER is
// none). A variable that cannot be used is an error naming it.
func Resolve(cfg *config.Tracing, env func(string) (string, bool)) (*Settings, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	get := func(k string) string {
		v, _ := env(k)
		return strings.TrimSpace(v)
	}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	attrs, err := resourceAttributes(get("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		return fromConfig(cfg, attrs)
	}
	return fromEnv(get, attrs)
}

func fromConfig(cfg *config.Tracing, attrs []attribute.KeyValue) (*Settings, error) {
	s := &Settings{
		Protocol: cfg.Protocol, Headers: cfg.Headers, Sampler: SamplerParentRatio, Ratio: cfg.Ratio(),
		ServiceName: cfg.ServiceName, Attributes: attrs, Source: "config",
	}
	if s.Protocol == "" {
		s.Protocol = config.TracingHTTP
	}
	if s.ServiceName == "" {
		s.ServiceName = config.DefaultTracingServiceName
	}
	e := cfg.Endpoint
	if !strings.Contains(e, "://") {
		scheme := "https"
		if cfg.Insecure {
			scheme = "http"
		}
		e = scheme + "://" + e
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("tracing.endpoint %q is not a URL or host:port; write e.g. http://127.0.0.1:4318", cfg.Endpoint)
	}
	if s.Protocol == config.TracingHTTP && (u.Path == "" || u.Path == "/") {
		u.Path = httpTracesPath
	}
	s.Endpoint = u.String()
	return s, nil
}

func fromEnv(get func(string) string, attrs []attribute.KeyValue) (*Settings, error) {
	either := func(key string) (string, string) {
		if v := get(envTracesPrefix + key); v != "" {
			return v, envTracesPrefix + key
		}
		return get(envPrefix + key), envPrefix + key
	}
	tracesEndpoint, base := get(envTracesPrefix+"ENDPOINT"), get(envPrefix+"ENDPOINT")
	switch exp := strings.ToLower(get("OTEL_TRACES_EXPORTER")); {
	case exp == "" && tracesEndpoint == "" && base == "", exp == "none":
		return nil, nil // off by default: an SDK's default exporter would be otlp
	case exp != "" && !containsItem(exp, "otlp"):
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: mcpgw exports traces over OTLP only; set it to otlp (or none), or configure the tracing section", exp)
	}
	s := &Settings{Sampler: SamplerParentAlwaysOn, Ratio: 1, ServiceName: config.DefaultTracingServiceName, Attributes: attrs, Source: "environment"}
	proto, protoVar := either("PROTOCOL")
	switch proto {
	case "", config.TracingHTTP:
		s.Protocol = config.TracingHTTP
	case config.TracingGRPC:
		s.Protocol = config.TracingGRPC
	default:
		return nil, fmt.Errorf("%s=%q: use http/protobuf or grpc", protoVar, proto)
	}
	insecureVal, insecureVar := either("INSECURE")
	insecure := strings.EqualFold(insecureVal, "true")
	if insecureVal != "" && !insecure && !strings.EqualFold(insecureVal, "false") {
		return nil, fmt.Errorf("%s=%q: use true or false", insecureVar, insecureVal)
	}
	endpoint, endpointVar := tracesEndpoint, envTracesPrefix+"ENDPOINT"
	if endpoint == "" {
		endpoint, endpointVar = base, envPrefix+"ENDPOINT"
	}
	if endpoint == "" {
		endpoint, endpointVar = defaultHTTPEndpoint, "the OTLP default"
		if s.Protocol == config.TracingGRPC {
			endpoint = defaultGRPCEndpoint
		}
	}
	if !strings.Contains(endpoint, "://") {
		if _, _, err := net.SplitHostPort(endpoint); err != nil {
			return nil, fmt.Errorf("%s=%q is neither a URL nor host:port; write e.g. http://127.0.0.1:4318", endpointVar, endpoint)
		}
		scheme := "https"
		if insecure {
			scheme = "http"
		}
		endpoint = scheme + "://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s=%q is not an http(s) URL; write e.g. http://127.0.0.1:4318", endpointVar, endpoint)
	}
	if s.Protocol == config.TracingHTTP && endpointVar != envTracesPrefix+"ENDPOINT" {
		// The signal-independent endpoint is a base: the signal's path is appended.
		u.Path = strings.TrimSuffix(u.Path, "/") + httpTracesPath
	}
	s.Endpoint = u.String()
	headers, headersVar := either("HEADERS")
	if s.Headers, err = parseList(headers); err != nil {
		return nil, fmt.Errorf("%s: %v; write key=value pairs separated by commas, values URL-encoded", headersVar, err)
	}
	if name := get("OTEL_SERVICE_NAME"); name != "" {
		s.ServiceName = name
	} else {
		for _, a := range attrs {
			if a.Key == "service.name" {
				s.ServiceName = a.Value.AsString()
			}
		}
	}
	if s.Sampler, s.Ratio, err = envSampler(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return nil, err
	}
	return s, nil
}

func envSampler(name, arg string) (string, float64, error) {
	if name == "" {
		return SamplerParentAlwaysOn, 1, nil
	}
	switch name {
	case SamplerAlwaysOn, SamplerAlwaysOff, SamplerParentAlwaysOn, SamplerParentAlwaysOff:
		return name, 1, nil
	case SamplerRatio, SamplerParentRatio:
		if arg == "" {
			return name, 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return "", 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: give a ratio from 0 to 1 for %s", arg, name)
		}
		return name, r, nil
	}
	return "", 0, fmt.Errorf("OTEL_TRACES_SAMPLER=%q is not supported; use one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
}

// parseList reads the W3C-baggage-like key=value,key=value lists of
// OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES.
func parseList(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", item)
		}
		uv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the value of %q is not URL-encoded", k)
		}
		out[k] = uv
	}
	return out, nil
}

func resourceAttributes(s string) ([]attribute.KeyValue, error) {
	if len(s) > maxResourceAttributesLength {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES is %d bytes; keep it under %d", len(s), maxResourceAttributesLength)
	}
	m, err := parseList(s)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %v; write key=value pairs separated by commas", err)
	}
	out := make([]attribute.KeyValue, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, attribute.String(k, m[k]))
	}
	return out, nil
}

func containsItem(list, item string) bool {
	for _, x := range strings.Split(list, ",") {
		if strings.TrimSpace(x) == item {
			return true
		}
	}
	return false
}
