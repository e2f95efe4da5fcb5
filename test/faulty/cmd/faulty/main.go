// Command faulty is the fault-injecting MCP server of package
// test/faulty: each of its tools is a fault (crash, hang, garbage, huge
// line, stderr flood, slow answers, connection reset, session expiry, SSE
// stream cut, tool list change, grandchild process), scripted by the call's
// arguments.
//
// Usage:
//
//	faulty [--name NAME] [--modern]               serve MCP on stdin/stdout
//	faulty --http 127.0.0.1:0 [--session-ttl 1m]  serve Streamable HTTP at http://ADDR/mcp
//
// --modern also speaks 2026-07-28 (server/discover, stateless requests,
// subscriptions/listen) beside the initialize handshake.
//
// With --http it prints "faulty: serving http://ADDR/mcp" on stdout once
// listening. On stdio, a crash call makes it exit with status 3.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpgw/mcpgw/test/faulty"
)

func main() {
	faulty.SleepIfGrandchild()
	name := flag.String("name", "faulty", "serverInfo.name")
	addr := flag.String("http", "", "serve Streamable HTTP at http://`ADDR`/mcp instead of stdio (port 0 picks a free port)")
	ttl := flag.Duration("session-ttl", 0, "HTTP: forget sessions idle this long (0: never)")
	modern := flag.Bool("modern", false, "also speak 2026-07-28 (server/discover, stateless requests, subscriptions/listen)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := faulty.NewServer(faulty.Options{Name: *name, Stderr: os.Stderr, SessionTTL: *ttl, Modern: *modern})
	if *addr == "" {
		err := srv.ServeStdio(ctx, os.Stdin, os.Stdout)
		switch {
		case faulty.ErrCrash(err):
			os.Exit(3)
		case err != nil && ctx.Err() == nil:
			fmt.Fprintln(os.Stderr, "faulty:", err)
			os.Exit(1)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulty:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTP())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("faulty: serving http://%s/mcp\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "faulty:", err)
		os.Exit(1)
	}
}
