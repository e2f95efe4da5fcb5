package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// A real OTLP receiver: Jaeger v2 (built from its Go module by .ci/run,
// test/tracing/jaeger), started here on 127.0.0.1 with in-memory storage.
// The gateway exports to it over OTLP/HTTP and OTLP/gRPC, and the test
// reads the traces back through Jaeger's HTTP API.

// jaegerBinary finds jaeger (MCPGW_JAEGER, else PATH), skipping the test
// when it is missing unless MCPGW_REQUIRE_JAEGER is set.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MCPGW_JAEGER"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p
	}
	if os.Getenv("MCPGW_REQUIRE_JAEGER") != "" {
		t.Fatal("jaeger is not installed and MCPGW_REQUIRE_JAEGER is set: build it with test/tracing/jaeger/build.sh")
	}
	t.Skip("jaeger is not installed (test/tracing/jaeger/build.sh builds it; set MCPGW_REQUIRE_JAEGER=1 to require it)")
	return ""
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer collects a child's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type jaeger struct {
	otlpHTTP, otlpGRPC, query string // host:port
}

// startJaeger runs Jaeger with only what the test needs, every listener on
// 127.0.0.1, and waits until its query API answers.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := jaegerBinary(t)
	j := &jaeger{otlpHTTP: freePort(t), otlpGRPC: freePort(t), query: freePort(t)}
	cfg := fmt.Sprintf(`
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 1000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
      grpc:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, j.query, freePort(t), j.otlpHTTP, j.otlpGRPC)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	cmd := exec.Command(bin, "--config", "file:"+path)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second): // a bound on the event, far above its time
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("jaeger output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("jaeger exited: %v\n%s", err, out.String())
		default:
		}
		if resp, err := http.Get("http://" + j.query + "/api/services"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger's query API did not answer within 60s:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond) // a poll, bounded by deadline
	}
}

// jaegerSpan is a span as Jaeger's /api/traces answers it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

func (s jaegerSpan) tag(k string) string {
	for _, t := range s.Tags {
		if t.Key == k {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// trace fetches a trace, waiting until it has at least n spans.
func (j *jaeger) trace(t *testing.T, traceID string, n int) []jaegerSpan {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var body struct {
			Data []struct {
				Spans     []jaegerSpan `json:"spans"`
				Processes map[string]struct {
					ServiceName string `json:"serviceName"`
				} `json:"processes"`
			} `json:"data"`
		}
		resp, err := http.Get("http://" + j.query + "/api/traces/" + traceID)
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
		}
		if len(body.Data) == 1 && len(body.Data[0].Spans) >= n {
			for _, s := range body.Data[0].Spans {
				if svc := body.Data[0].Processes[s.ProcessID].ServiceName; svc != "mcpgw" {
					t.Errorf("span %s from service %q, want mcpgw", s.OperationName, svc)
				}
			}
			return body.Data[0].Spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: %d spans in Jaeger after 20s, want %d", traceID, spanCount(body.Data), n)
		}
		time.Sleep(200 * time.Millisecond) // a poll, bounded by deadline
	}
}

func spanCount[T any](data []T) int { return len(data) }

// The spans of calls through the gateway to an upstream reach Jaeger over
// OTLP/HTTP and OTLP/gRPC, configured in YAML or by OTEL_* variables: the server span is the child of the caller's
// traceparent, the client span its child (and the upstream got the client
// span as its parent); both carry the tool and the upstream; a failing call
// is an error span.
func TestTracesReachJaeger(t *testing.T) {
	j := startJaeger(t)
	for _, tc := range []struct {
		name, tracing, traceID string
		env                    map[string]string
	}{
		{"yaml-http", "tracing: {endpoint: http://" + j.otlpHTTP + ", protocol: http/protobuf}", "5bf92f3577b34da6a3ce929d0e0e4731", nil},
		{"yaml-grpc", "tracing: {endpoint: " + j.otlpGRPC + ", protocol: grpc, insecure: true}", "5bf92f3577b34da6a3ce929d0e0e4732", nil},
		// No tracing: section: the standard variables turn it on.
		{"env-http", "", "5bf92f3577b34da6a3ce929d0e0e4733", map[string]string{
			"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + j.otlpHTTP, "OTEL_SERVICE_NAME": "mcpgw",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const callerSpan = "00f067aa0ba902b7"
			up := newTracedUpstream(t)
			cfg, err := config.Parse("test.yaml", []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
%s
`, up.url, tc.tracing)), nil)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			env := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			gw, err := gateway.Start(cfg, gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln, Getenv: env})
			if err != nil {
				t.Fatal(err)
			}
			c := &gatewaytest.RawClient{T: t, URL: "http://" + ln.Addr().String() + "/mcp", Header: http.Header{"Traceparent": {"00-" + tc.traceID + "-" + callerSpan + "-01"}}}
			c.Initialize("2025-11-25")
			c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"hi"}}}`).Last(t)
			c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__fail","arguments":{}}}`).Last(t)
			// Shutdown exports what is batched.
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := gw.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}

			spans := j.trace(t, tc.traceID, 4)
			byName := map[string]jaegerSpan{}
			for _, s := range spans {
				if s.TraceID != tc.traceID {
					t.Errorf("span %s in trace %s", s.OperationName, s.TraceID)
				}
				byName[s.OperationName+" "+s.tag("span.kind")] = s
			}
			server, client := byName["tools/call alpha__echo server"], byName["tools/call echo client"]
			failing, failingClient := byName["tools/call alpha__fail server"], byName["tools/call fail client"]
			if server.SpanID == "" || client.SpanID == "" || failing.SpanID == "" || failingClient.SpanID == "" {
				var names []string
				for k := range byName {
					names = append(names, k)
				}
				t.Fatalf("spans in Jaeger: %v; want the server and client spans of both calls", names)
			}
			if server.parent() != callerSpan || failing.parent() != callerSpan {
				t.Errorf("server spans' parents %s, %s; want the caller's span %s", server.parent(), failing.parent(), callerSpan)
			}
			if client.parent() != server.SpanID || failingClient.parent() != failing.SpanID {
				t.Errorf("client spans' parents %s, %s; want their server spans %s, %s", client.parent(), failingClient.parent(), server.SpanID, failing.SpanID)
			}
			for _, c := range []struct {
				span     jaegerSpan
				tool     string
				errType  string
				errorTag string
			}{
				{server, "alpha__echo", "", ""}, {client, "echo", "", ""},
				{failing, "alpha__fail", "tool_error", "true"}, {failingClient, "fail", "tool_error", "true"},
			} {
				if got := c.span.tag("gen_ai.tool.name"); got != c.tool {
					t.Errorf("%s: gen_ai.tool.name %q, want %q", c.span.OperationName, got, c.tool)
				}
				if got := c.span.tag("mcpgw.upstream"); got != "alpha" {
					t.Errorf("%s: mcpgw.upstream %q, want alpha", c.span.OperationName, got)
				}
				if got := c.span.tag("mcp.method.name"); got != "tools/call" {
					t.Errorf("%s: mcp.method.name %q", c.span.OperationName, got)
				}
				if got := c.span.tag("error.type"); got != c.errType {
					t.Errorf("%s: error.type %q, want %q", c.span.OperationName, got, c.errType)
				}
				if got := c.span.tag("error"); got != c.errorTag {
					t.Errorf("%s: error tag %q, want %q (status ERROR)", c.span.OperationName, got, c.errorTag)
				}
			}
			// The upstream was told the gateway's client span is its parent.
			seen := up.seen()
			if len(seen) != 2 || seen[0].header != "00-"+tc.traceID+"-"+client.SpanID+"-01" || seen[0].meta != seen[0].header {
				t.Errorf("upstream saw %+v; want the client span %s as parent", seen, client.SpanID)
			}
		})
	}
}
