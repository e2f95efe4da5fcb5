package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/demo"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// The benchmark's processes are this binary re-executed with a role as its
// first argument, so each one has its own /proc/<pid>/stat and its own Go
// heap: the CPU and allocations of the middle process are its alone.
const (
	roleUpstream  = "role-upstream"   // go-sdk MCP servers over Streamable HTTP
	roleForwarder = "role-forwarder"  // the transparent forwarder
	roleGateway   = "role-gateway"    // mcpgw (internal/gateway, as `mcpgw run` starts it)
	roleDemo      = "demo-server"     // mcpgw's demo server on stdio (`mcpgw demo-server`)
	roleStdioEcho = "role-stdio-echo" // the stdio floor: a minimal JSON-RPC echo child (stdioecho.go)
)

// runRole runs a child role and reports whether args named one.
func runRole(args []string) (bool, int) {
	if len(args) == 0 {
		return false, 0
	}
	var err error
	switch args[0] {
	case roleUpstream:
		err = upstreamRole(args[1:])
	case roleForwarder:
		err = forwarderRole(args[1:])
	case roleGateway:
		err = gatewayRole(args[1:])
	case roleDemo:
		err = demo.Server("bench").Run(context.Background(), &mcp.StdioTransport{})
	case roleStdioEcho:
		err = stdioEchoRole()
	default:
		return false, 0
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", args[0], err)
		return true, 1
	}
	return true, 0
}

// serveStats serves what the parent measures that /proc does not show:
// the Go runtime's allocation counters and the MCP listener's accepted
// connections (/stats, ?gc=1 collects first) and pprof profiles
// (/debug/pprof/), on a listener of its own.
func serveStats(conns *atomic.Int64) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gc") == "1" {
			runtime.GC()
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(memStats{Mallocs: ms.Mallocs, HeapAlloc: ms.HeapAlloc, TotalAlloc: ms.TotalAlloc, Goroutines: runtime.NumGoroutine(), Conns: conns.Load()})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go func() { _ = http.Serve(ln, mux) }() // ends with the process
	return "http://" + ln.Addr().String(), nil
}

// memStats is /stats' answer.
type memStats struct {
	Mallocs    uint64 `json:"mallocs"`
	HeapAlloc  uint64 `json:"heap_alloc"`
	TotalAlloc uint64 `json:"total_alloc"`
	Goroutines int    `json:"goroutines"`
	Conns      int64  `json:"conns"` // TCP connections the MCP listener accepted
}

// countingServer serves h on ln, counting the connections it accepts.
func countingServer(ln net.Listener, h http.Handler, conns *atomic.Int64) {
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go func() { _ = srv.Serve(ln) }() // ends with the process
}

// ready tells the parent where the role listens; the parent reads this one
// line from the child's stdout.
func ready(mcpURL, statsURL string) {
	fmt.Printf("READY %s %s\n", mcpURL, statsURL)
}

// waitSignal blocks until the parent stops the child.
func waitSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	<-ch
}

// upstreamRole serves go-sdk MCP servers: one at /mcp with echo and big
// (a result of -big bytes), or -paths servers at /u0… with -tools tools
// each (the tools/list scenario).
func upstreamRole(args []string) error {
	fs := flag.NewFlagSet(roleUpstream, flag.ContinueOnError)
	paths := fs.Int("paths", 0, "serve this many list servers at /u0…, instead of the echo server at /mcp")
	tools := fs.Int("tools", 200, "tools per list server")
	big := fs.Int("big", 1<<20, "bytes of text in the big tool's result")
	tlsAddr := fs.String("tls-addr", "", "also serve the same servers over TLS at this address (the tls scenario)")
	tlsCert := fs.String("tls-cert", "", "with -tls-addr: the certificate file")
	tlsKey := fs.String("tls-key", "", "with -tls-addr: the key file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mux := http.NewServeMux()
	if *paths == 0 {
		srv := echoServer(*big)
		mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		// 2026-07-28 requests need a stateless go-sdk handler.
		mux.Handle("/stateless", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	}
	for i := range *paths {
		srv := listServer(i, *tools)
		mux.Handle(fmt.Sprintf("/u%d", i), mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var conns atomic.Int64
	stats, err := serveStats(&conns)
	if err != nil {
		return err
	}
	countingServer(ln, mux, &conns)
	if *tlsAddr != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return err
		}
		tln, err := net.Listen("tcp", *tlsAddr)
		if err != nil {
			return err
		}
		countingServer(tls.NewListener(tln, &tls.Config{Certificates: []tls.Certificate{cert}}), mux, &conns)
	}
	ready("http://"+ln.Addr().String(), stats)
	waitSignal()
	return nil
}

type echoIn struct {
	Text string `json:"text"`
}

type bigIn struct{}

// echoServer has echo (the small call) and big (the 1 MiB result).
func echoServer(bigBytes int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-echo", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	bigText := strings.Repeat("x", bigBytes)
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "A large text result."},
		func(context.Context, *mcp.CallToolRequest, bigIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: bigText}}}, nil, nil
		})
	return s
}

// listServer has n tools with realistic-size definitions.
func listServer(i, n int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: fmt.Sprintf("bench-list-%d", i), Version: "1"}, nil)
	for j := range n {
		mcp.AddTool(s, &mcp.Tool{Name: fmt.Sprintf("tool_%03d", j), Description: "A tool of the 10,000-tool catalog: it echoes its text argument."},
			func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
			})
	}
	return s
}

// forwardedHeaders are the request headers the forwarder passes upstream
// and the answer headers it passes back.
var (
	forwardedHeaders = []string{"Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id", "Authorization"}
	answerHeaders    = []string{"Content-Type", "Mcp-Session-Id"}
)

// forwarderRole is the floor any gateway on this machine is measured
// against: it parses nothing. It reads the body, POSTs it upstream with a
// keep-alive client and streams the answer back, flushing as it goes.
func forwarderRole(args []string) error {
	fs := flag.NewFlagSet(roleForwarder, flag.ContinueOnError)
	upstream := fs.String("upstream", "", "the upstream's base URL (the request's path is appended)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	client := &http.Client{Transport: tr}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, *upstream+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for _, k := range forwardedHeaders {
			if v := r.Header.Values(k); len(v) > 0 {
				req.Header[k] = v
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for _, k := range answerHeaders {
			if v := resp.Header.Values(k); len(v) > 0 {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		fl, _ := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				if fl != nil {
					fl.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var conns atomic.Int64
	stats, err := serveStats(&conns)
	if err != nil {
		return err
	}
	countingServer(ln, h, &conns)
	ready("http://"+ln.Addr().String(), stats)
	waitSignal()
	return nil
}

// gatewayRole runs mcpgw from a config file, as `mcpgw run -c FILE` does
// (JSON logs at info, here to stderr, which the parent keeps in a file).
func gatewayRole(args []string) error {
	fs := flag.NewFlagSet(roleGateway, flag.ContinueOnError)
	path := fs.String("config", "", "the config file")
	procs := fs.Int("gomaxprocs", 0, "GOMAXPROCS of this replica (0: the runtime's choice)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	cfg, err := config.Load(*path, os.LookupEnv, policy.CheckConfig)
	if err != nil {
		return err
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	log := zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.InfoLevel))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: log, Listener: ln, Version: "bench"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	err = gw.Host().WaitReady(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("upstreams did not start: %w", err)
	}
	var none atomic.Int64 // the gateway's own listener is not counted
	stats, err := serveStats(&none)
	if err != nil {
		return err
	}
	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://" // the gateway serves its listener with the config's certificate
	}
	ready(scheme+ln.Addr().String(), stats)
	waitSignal()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return gw.Shutdown(ctx)
}
