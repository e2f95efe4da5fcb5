package gateway_test

// tools/call latency benchmarks: the same official-SDK upstream called
// directly and through a gateway, with the official SDK client and with a
// minimal raw HTTP client. They run only with -bench, for example
//
//	go test -run '^$' -bench ToolsCall -benchtime 2000x -count 5 ./internal/gateway
//
// docs/benchmarks.md has measured numbers and how to read them.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// benchVersion is the protocol revision every benchmark client pins: the
// SDK client would otherwise try 2026-07-28 first, which the SDK upstream
// offers and the gateway's downstream side does not, so the direct and the
// gateway paths would speak different revisions to the client.
const benchVersion = "2025-11-25"

// benchParallelism multiplies GOMAXPROCS into the number of goroutines the
// parallel variants run, so they keep several calls in flight even on a
// small machine.
const benchParallelism = 8

// benchHTTPClient is the HTTP client of every benchmark client: keep-alive
// connections enough for the parallel variants, so no run pays for new TCP
// connections after warm-up.
func benchHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}

// benchHTTPUpstream is gatewaytest.HTTPUpstream for benchmarks (gatewaytest.HTTPUpstream takes a
// *testing.T): gatewaytest.SDKServer "name" over Streamable HTTP on 127.0.0.1.
func benchHTTPUpstream(tb testing.TB, name string) string {
	tb.Helper()
	srv := gatewaytest.SDKServer(name, 2)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	tb.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// benchStartGateway is gatewaytest.StartGateway for benchmarks, with a no-op logger so
// logging stays out of the measurement.
func benchStartGateway(tb testing.TB, yaml string) (*gateway.Gateway, string) {
	tb.Helper()
	cfg, err := config.Parse("bench.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: zap.NewNop(), Listener: ln})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gw.Host().WaitReady(ctx); err != nil {
		tb.Fatalf("upstreams did not start: %v", err)
	}
	return gw, "http://" + ln.Addr().String() + "/mcp"
}

// benchGatewayURL starts a gateway fronting an HTTP upstream "alpha" and a
// stdio upstream "beta" (the test binary re-executed, as in gatewaytest.TwoUpstreams)
// and returns its /mcp endpoint, where their echo tools are alpha__echo and
// beta__echo.
func benchGatewayURL(tb testing.TB) string {
	tb.Helper()
	alpha := benchHTTPUpstream(tb, "alpha")
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	gw, url := benchStartGateway(tb, fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams:
  alpha:
    url: %s
  beta:
    command: [%q]
    env: {MCPGW_TEST_STDIO_SERVER: beta}
routes:
  - path: /mcp
`, alpha, exe))
	// Which revision each upstream hop speaks changes what a call costs
	// (go test -v shows it).
	for _, name := range []string{"alpha", "beta"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := gw.Host().Upstream(name).Client(ctx)
		cancel()
		if err != nil {
			tb.Fatalf("upstream %s: %v", name, err)
		}
		tb.Logf("gateway → %s speaks %s", name, c.ProtocolVersion())
	}
	return url
}

// benchConnect opens an official-SDK client session over transport.
func benchConnect(tb testing.TB, transport mcp.Transport) *mcp.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "1"}, nil)
	cs, err := c.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: benchVersion})
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

// benchSDKHTTP opens an SDK session over Streamable HTTP to url.
func benchSDKHTTP(tb testing.TB, url string) *mcp.ClientSession {
	tb.Helper()
	return benchConnect(tb, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: benchHTTPClient(), MaxRetries: -1})
}

// benchCall makes one echo call and checks its answer.
func benchCall(ctx context.Context, cs *mcp.ClientSession, tool, want string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("%s: unexpected result %+v", tool, res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != want {
		return fmt.Errorf("%s: got %+v, want text %q", tool, res.Content[0], want)
	}
	return nil
}

// benchWarm makes a few calls before the timer starts: they prove the path
// works and leave connections and caches warm.
func benchWarm(tb testing.TB, call func() error) {
	tb.Helper()
	for range 20 {
		if err := call(); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchSDK runs the SDK-client benchmark of one path: serially, then with
// GOMAXPROCS*benchParallelism goroutines sharing the one session.
func benchSDK(b *testing.B, name string, cs *mcp.ClientSession, tool, want string) {
	ctx := context.Background()
	b.Run(name, func(b *testing.B) {
		benchWarm(b, func() error { return benchCall(ctx, cs, tool, want) })
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := benchCall(ctx, cs, tool, want); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(name+"-parallel", func(b *testing.B) {
		benchWarm(b, func() error { return benchCall(ctx, cs, tool, want) })
		b.ReportAllocs()
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := benchCall(ctx, cs, tool, want); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkToolsCallDirect is the baseline: the SDK client calling the SDK
// upstream's echo tool with no gateway in between, over Streamable HTTP
// (/http) and, for reference, over stdio to the same child the gateway's
// stdio benchmark spawns (/stdio).
func BenchmarkToolsCallDirect(b *testing.B) {
	cs := benchSDKHTTP(b, benchHTTPUpstream(b, "alpha"))
	benchSDK(b, "http", cs, "echo", "alpha:hi")

	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "MCPGW_TEST_STDIO_SERVER=beta")
	benchSDK(b, "stdio", benchConnect(b, &mcp.CommandTransport{Command: cmd}), "echo", "beta:hi")
}

// BenchmarkToolsCallGateway is the same SDK client calling the same tools
// through a gateway (client → gateway over Streamable HTTP → upstream).
func BenchmarkToolsCallGateway(b *testing.B) {
	cs := benchSDKHTTP(b, benchGatewayURL(b))
	benchSDK(b, "http-upstream", cs, "alpha__echo", "alpha:hi")
	benchSDK(b, "stdio-upstream", cs, "beta__echo", "beta:hi")
}

// benchRaw is a minimal MCP client: one pre-encoded tools/call body POSTed
// with net/http, its answer read whole. It keeps the SDK client's own costs
// out of the numbers.
type benchRaw struct {
	client  *http.Client
	url     string
	accept  string
	session string
	body    []byte // the tools/call request
	want    []byte // bytes the answer must contain
	answers string // Content-Type of the first answer
}

func (c *benchRaw) post(ctx context.Context, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", c.accept)
	req.Header.Set("Mcp-Protocol-Version", benchVersion)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// newBenchRaw initializes a session at url and prepares a tools/call of
// tool; accept is the Accept header of every request.
func newBenchRaw(tb testing.TB, client *http.Client, url, accept, tool, want string) *benchRaw {
	tb.Helper()
	c := &benchRaw{client: client, url: url, accept: accept,
		body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"hi"}}}`),
		want: []byte(`"text":"` + want + `"`)}
	ctx := context.Background()
	resp, b, err := c.post(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+benchVersion+`","capabilities":{},"clientInfo":{"name":"bench-raw","version":"1"}}}`))
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("initialize: HTTP %d %s", resp.StatusCode, b)
	}
	if c.session = resp.Header.Get("Mcp-Session-Id"); c.session == "" {
		tb.Fatal("initialize: no Mcp-Session-Id")
	}
	if resp, b, err = c.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil || resp.StatusCode != http.StatusAccepted {
		tb.Fatalf("notifications/initialized: %v HTTP %v %s", err, resp, b)
	}
	// Check one answer thoroughly, JSON or SSE, before relying on the
	// cheap check of call.
	resp, b, err = c.post(ctx, c.body)
	if err != nil {
		tb.Fatal(err)
	}
	m := benchLastMessage(tb, resp.Header.Get("Content-Type"), b)
	if m.Error != nil || !m.ID.Valid() || !bytes.Contains(m.Result, c.want) {
		tb.Fatalf("tools/call %s: unexpected answer %s", tool, b)
	}
	c.answers = resp.Header.Get("Content-Type")
	return c
}

// benchLastMessage parses a JSON body or an SSE stream and returns its last
// JSON-RPC message (on a stream, the response).
func benchLastMessage(tb testing.TB, contentType string, body []byte) *jsonrpc.Message {
	tb.Helper()
	var last *jsonrpc.Message
	if strings.HasPrefix(contentType, "text/event-stream") {
		rd := sse.NewReader(bytes.NewReader(body), 1<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if m, err := jsonrpc.Parse(ev.Data); err == nil {
				last = m
			}
		}
	} else if m, err := jsonrpc.Parse(body); err == nil {
		last = m
	}
	if last == nil {
		tb.Fatalf("no JSON-RPC message in %q answer: %s", contentType, body)
	}
	return last
}

// call makes one tools/call and checks the answer cheaply: HTTP 200 and the
// expected text somewhere in the body (a JSON body or an SSE stream alike).
func (c *benchRaw) call(ctx context.Context) error {
	resp, b, err := c.post(ctx, c.body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, c.want) {
		return fmt.Errorf("tools/call: HTTP %d %s", resp.StatusCode, b)
	}
	return nil
}

// benchRawPath runs the raw-client benchmark of one path: serially over one
// session, then in parallel with one session per goroutine (a raw request
// id is fixed, and ids must not repeat among a session's in-flight calls).
// Sessions are set up inside each sub-benchmark, and only once, so -bench
// filters skip the setup of paths they do not run (it would show in
// -cpuprofile).
func benchRawPath(b *testing.B, name, url, accept, tool, want string) {
	client := benchHTTPClient()
	ctx := context.Background()
	var serial *benchRaw
	b.Run(name, func(b *testing.B) {
		if serial == nil {
			serial = newBenchRaw(b, client, url, accept, tool, want)
			b.Logf("%s answers tools/call %s with %s", url, tool, serial.answers)
		}
		benchWarm(b, func() error { return serial.call(ctx) })
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := serial.call(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	var clients []*benchRaw
	b.Run(name+"-parallel", func(b *testing.B) {
		if clients == nil {
			// RunParallel starts exactly GOMAXPROCS*parallelism goroutines.
			clients = make([]*benchRaw, runtime.GOMAXPROCS(0)*benchParallelism)
			for i := range clients {
				clients[i] = newBenchRaw(b, client, url, accept, tool, want)
			}
		}
		for _, c := range clients {
			benchWarm(b, func() error { return c.call(ctx) })
		}
		var next atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			c := clients[next.Add(1)-1]
			for pb.Next() {
				if err := c.call(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkToolsCallRawHTTP isolates the gateway's own overhead from the SDK
// client's: a raw client POSTs a pre-encoded tools/call. Through the gateway
// it accepts only application/json, so the gateway answers with one JSON
// body; directly, the SDK upstream insists on an Accept that also lists
// text/event-stream and answers its POSTs with an SSE stream. The -sse
// variant accepts both through the gateway too, which makes the gateway
// answer tools/call with an SSE stream, as it does for SDK clients.
func BenchmarkToolsCallRawHTTP(b *testing.B) {
	const bothAccept = "application/json, text/event-stream"
	benchRawPath(b, "direct-http", benchHTTPUpstream(b, "alpha"), bothAccept, "echo", "alpha:hi")
	gw := benchGatewayURL(b)
	benchRawPath(b, "gateway-http-upstream", gw, "application/json", "alpha__echo", "alpha:hi")
	benchRawPath(b, "gateway-stdio-upstream", gw, "application/json", "beta__echo", "beta:hi")
	benchRawPath(b, "gateway-stdio-upstream-sse", gw, bothAccept, "beta__echo", "beta:hi")
}
