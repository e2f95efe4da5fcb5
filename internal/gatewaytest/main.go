// Package gatewaytest is the shared support of the tests that run a whole
// gateway: start one from YAML (StartGateway, RunGateway), official-SDK
// upstreams over HTTP and as stdio children (HTTPUpstream, StdioUpstream,
// the fidelity upstreams), SDK and raw HTTP clients (Connect, RawClient),
// stdio and legacy SSE drivers, and the admin side (scrape, Readiness).
// It lets each package test its part through a real gateway from beside
// its own code, instead of every such test living in internal/gateway.
//
// A test binary that uses the stdio upstreams must run Main from its
// TestMain: the binary doubles as the child process it starts.
package gatewaytest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Main runs the tests of m, unless this process was started as one of the
// stdio upstreams below, in which case it serves that upstream on stdin and
// stdout and exits: stdio tests use a real child process speaking through
// real pipes.
func Main(m *testing.M) {
	if marker := os.Getenv("MCPGW_TEST_HOSTILE_STDIO"); marker != "" {
		serveHostileStdio(marker)
		os.Exit(0)
	}
	if dir := os.Getenv("MCPGW_TEST_SCRIPTED_STDIO"); dir != "" {
		serveScriptedStdio(dir)
		os.Exit(0)
	}
	if name := os.Getenv("MCPGW_TEST_FIDELITY_SERVER"); name != "" {
		rec := &fidFileLog{path: filepath.Join(os.Getenv("MCPGW_TEST_FIDELITY_DIR"), "events.log")}
		modern := os.Getenv("MCPGW_TEST_FIDELITY_MODERN") != ""
		if err := FidelityServer(name, rec, nil, modern).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "fidelity stdio server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if name := os.Getenv("MCPGW_TEST_STDIO_SERVER"); name != "" {
		// With MCPGW_TEST_STDIO_RELEASE, a server slow to start: it
		// answers nothing until that file exists (startup_test.go).
		// A child process polls for its release file (no channel crosses
		// processes); the test bounds the wait.
		for release := os.Getenv("MCPGW_TEST_STDIO_RELEASE"); release != ""; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(release); err == nil {
				break
			}
		}
		if err := SDKServer(name, 2).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "stdio test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The tests wait on sockets, child processes and timers far more than
	// they compute, so more of them run at once than there are cores:
	// four, unless -test.parallel says otherwise.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0))))
	}
	os.Exit(m.Run())
}
