package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// The fidelity upstream is an official-SDK server whose tools use what a
// server may send during a call: sampling, elicitation, roots, log messages,
// plus tools that block (cancellation), grow the tool list and fire resource
// updates. In-process it records what happened in memory; run as a stdio
// child (the test binary with MCPGW_TEST_FIDELITY_SERVER set) it appends the
// same records to a file the test reads.
//
// TestMain lives in peers_test.go; an init function runs before it, so the
// child mode is entered here without touching that file.
func init() {
	name := os.Getenv("MCPGW_TEST_FIDELITY_SERVER")
	if name == "" {
		return
	}
	rec := &fidFileLog{path: filepath.Join(os.Getenv("MCPGW_TEST_FIDELITY_DIR"), "events.log")}
	modern := os.Getenv("MCPGW_TEST_FIDELITY_MODERN") != ""
	if err := fidelityServer(name, rec, nil, modern).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fidelity stdio server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// fidEventLog records what the upstream saw: "start <tag>", "cancel <tag>",
// "subscribe <uri>", "unsubscribe <uri>".
type fidEventLog interface {
	record(ev string)
	all() []string
}

// fidMemLog is the in-process log; each record is also signalled on events.
type fidMemLog struct {
	mu     sync.Mutex
	evs    []string
	events chan string
}

func newFidMemLog() *fidMemLog { return &fidMemLog{events: make(chan string, 256)} }

func (l *fidMemLog) record(ev string) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
	select {
	case l.events <- ev:
	default:
	}
}

func (l *fidMemLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

// fidFileLog is the stdio child's log: one line per record, appended.
type fidFileLog struct {
	mu   sync.Mutex
	path string
}

func (l *fidFileLog) record(ev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fidelity log:", err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(ev + "\n")
}

func (l *fidFileLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := os.ReadFile(l.path)
	if err != nil {
		return nil
	}
	var evs []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" {
			evs = append(evs, line)
		}
	}
	return evs
}

// fidBarrier lets n in-process tool calls wait for each other, proving
// they were in flight at the same time.
type fidBarrier struct {
	mu      sync.Mutex
	want    int
	arrived int
	all     chan struct{}
}

func newFidBarrier(n int) *fidBarrier { return &fidBarrier{want: n, all: make(chan struct{})} }

func (b *fidBarrier) await(ctx context.Context) error {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(testwait.Long): // calls that do not overlap never all arrive
		return fmt.Errorf("barrier: only %d of %d calls arrived: the calls did not overlap", b.arrived, b.want)
	}
}

func fidResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func fidErrorResult(format string, args ...any) *mcp.CallToolResult {
	r := fidResult(format, args...)
	r.IsError = true
	return r
}

// fidLegacyVersions are the SDK's protocol revisions before 2026-07-28:
// the ones with sessions, server→client requests during a call,
// logging/setLevel and resources/subscribe.
func fidLegacyVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= "2026-07-28" })
}

// fidelityServer builds the fidelity upstream. bar, when set, is the
// barrier "sample" and "elicit" calls with barrier:true meet at. Unless
// modern is set the server offers only the legacy revisions, so that the
// gateway speaks one of them to it: its tools use req.Session.CreateMessage,
// Elicit and ListRoots, which the SDK refuses on a 2026-07-28 session.
func fidelityServer(name string, rec fidEventLog, bar *fidBarrier, modern bool) *mcp.Server {
	var versions []string
	if !modern {
		versions = fidLegacyVersions()
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fidelity-" + name, Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			rec.record("subscribe " + req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			rec.record("unsubscribe " + req.Params.URI)
			return nil
		},
	})
	meet := func(ctx context.Context, want bool) error {
		if !want {
			return nil
		}
		if bar == nil {
			return fmt.Errorf("barrier requested but %s has none (stdio child)", name)
		}
		return bar.await(ctx)
	}

	type sampleIn struct {
		Tag     string `json:"tag"`
		DelayMS int    `json:"delay_ms,omitempty"`
		Barrier bool   `json:"barrier,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, in sampleIn) (*mcp.CallToolResult, any, error) {
		if in.DelayMS > 0 {
			time.Sleep(time.Duration(in.DelayMS) * time.Millisecond) // the behaviour under test: a slow tool
		}
		if err := meet(ctx, in.Barrier); err != nil {
			return fidErrorResult("%v", err), nil, nil
		}
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			MaxTokens: 16,
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "question from " + in.Tag}}},
		})
		if err != nil {
			return fidErrorResult("sampling failed: %v", err), nil, nil
		}
		text := ""
		if tc, ok := res.Content.(*mcp.TextContent); ok {
			text = tc.Text
		}
		return fidResult("tag=%s answer=%s", in.Tag, text), nil, nil
	})

	// caps reports the client capabilities this connection was initialized
	// with: what the upstream believes about its caller.
	mcp.AddTool(srv, &mcp.Tool{Name: "caps"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c := req.Session.InitializeParams().Capabilities
		if c == nil {
			c = &mcp.ClientCapabilities{}
		}
		return fidResult("sampling=%v elicitation=%v", c.Sampling != nil, c.Elicitation != nil), nil, nil
	})

	type elicitIn struct {
		Tag     string `json:"tag"`
		Barrier bool   `json:"barrier,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "elicit"}, func(ctx context.Context, req *mcp.CallToolRequest, in elicitIn) (*mcp.CallToolResult, any, error) {
		if err := meet(ctx, in.Barrier); err != nil {
			return fidErrorResult("%v", err), nil, nil
		}
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Mode:    "form",
			Message: "who is " + in.Tag + "?",
			RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"name": map[string]any{"type": "string"}},
				"required":   []string{"name"},
			},
		})
		if err != nil {
			return fidErrorResult("elicitation failed: %v", err), nil, nil
		}
		return fidResult("tag=%s action=%s name=%v", in.Tag, res.Action, res.Content["name"]), nil, nil
	})

	type tagIn struct {
		Tag string `json:"tag"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, in tagIn) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return fidErrorResult("roots/list failed: %v", err), nil, nil
		}
		var parts []string
		for _, r := range res.Roots {
			parts = append(parts, r.URI+"|"+r.Name)
		}
		return fidResult("%s", strings.Join(parts, ",")), nil, nil
	})

	mcp.AddTool(srv, &mcp.Tool{Name: "log"}, func(ctx context.Context, req *mcp.CallToolRequest, in tagIn) (*mcp.CallToolResult, any, error) {
		for _, level := range []mcp.LoggingLevel{"info", "error"} {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "fidelity", Data: in.Tag + " " + string(level)}); err != nil {
				return fidErrorResult("log: %v", err), nil, nil
			}
		}
		return fidResult("logged %s", in.Tag), nil, nil
	})

	type blockIn struct {
		Tag  string `json:"tag"`
		MS   int    `json:"ms,omitempty"`
		Hold bool   `json:"hold,omitempty"`
	}
	// A call with hold stays in flight until it is cancelled or the
	// release tool names its tag: a test that needs "a call in flight"
	// must not race a duration against a loaded machine.
	var relMu sync.Mutex
	released := map[string]chan struct{}{}
	releaseOf := func(tag string) chan struct{} {
		relMu.Lock()
		defer relMu.Unlock()
		ch, ok := released[tag]
		if !ok {
			ch = make(chan struct{})
			released[tag] = ch
		}
		return ch
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "release"}, func(_ context.Context, _ *mcp.CallToolRequest, in tagIn) (*mcp.CallToolResult, any, error) {
		ch := releaseOf(in.Tag)
		relMu.Lock()
		select {
		case <-ch:
		default:
			close(ch)
		}
		relMu.Unlock()
		return fidResult("released %s", in.Tag), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, in blockIn) (*mcp.CallToolResult, any, error) {
		rec.record("start " + in.Tag)
		var until <-chan struct{}
		var timer <-chan time.Time
		if in.Hold {
			until = releaseOf(in.Tag)
		} else {
			timer = time.After(time.Duration(in.MS) * time.Millisecond) // the behaviour under test: a tool that takes ms
		}
		select {
		case <-until:
			rec.record("finish " + in.Tag)
			return fidResult("done %s", in.Tag), nil, nil
		case <-timer:
			rec.record("finish " + in.Tag)
			return fidResult("done %s", in.Tag), nil, nil
		case <-ctx.Done():
			rec.record("cancel " + in.Tag)
			return nil, nil, ctx.Err()
		}
	})

	type growIn struct {
		Name string `json:"name"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "grow"}, func(_ context.Context, _ *mcp.CallToolRequest, in growIn) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(srv, &mcp.Tool{Name: in.Name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return fidResult("%s/%s", name, in.Name), nil, nil
		})
		return fidResult("grown %s", in.Name), nil, nil
	})

	// mrtr_sample asks for sampling the 2026-07-28 way: an input_required
	// result, answered by a retry carrying inputResponses.
	mcp.AddTool(srv, &mcp.Tool{Name: "mrtr_sample"}, func(_ context.Context, req *mcp.CallToolRequest, in tagIn) (*mcp.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["s"].(*mcp.CreateMessageWithToolsResult); ok {
			var text string
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text += tc.Text
				}
			}
			return fidResult("tag=%s answer=%s", in.Tag, text), nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"s": &mcp.CreateMessageParams{
			MaxTokens: 16,
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "question from " + in.Tag}}},
		}}}, nil, nil
	})

	type touchIn struct {
		URI string `json:"uri"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "touch"}, func(ctx context.Context, _ *mcp.CallToolRequest, in touchIn) (*mcp.CallToolResult, any, error) {
		if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI}); err != nil {
			return fidErrorResult("resource updated: %v", err), nil, nil
		}
		return fidResult("touched %s", in.URI), nil, nil
	})

	srv.AddResource(&mcp.Resource{URI: "mem://watched", Name: "watched"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "watched of " + name}}}, nil
		})
	return srv
}

// fidUpstream is one fidelity upstream as a gateway config entry.
type fidUpstream struct {
	name  string
	stdio bool
	srv   *mcp.Server // in-process (HTTP) only
	bar   *fidBarrier // in-process (HTTP) only
	log   fidEventLog
	entry string // the YAML under upstreams:
}

// fidHTTPUpstream serves a fidelity server over Streamable HTTP on loopback;
// extra is YAML appended to its config entry (indented 4 spaces).
func fidHTTPUpstream(t *testing.T, name string, barrier int, extra ...string) *fidUpstream {
	t.Helper()
	rec := newFidMemLog()
	var bar *fidBarrier
	if barrier > 0 {
		bar = newFidBarrier(barrier)
	}
	srv := fidelityServer(name, rec, bar, false)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	entry := fmt.Sprintf("  %s:\n    url: %s/mcp\n", name, ts.URL)
	for _, e := range extra {
		entry += "    " + e + "\n"
	}
	return &fidUpstream{name: name, srv: srv, bar: bar, log: rec, entry: entry}
}

// fidStdioUpstream runs a fidelity server as a stdio child of the gateway.
func fidStdioUpstream(t *testing.T, name string, extra ...string) *fidUpstream {
	t.Helper()
	return fidChild(t, name, "", extra...)
}

// fidModernStdioUpstream is a stdio fidelity server that also offers
// 2026-07-28, as the SDK does by default.
// fidModernStdioUpstream is a stdio upstream offering 2026-07-28, spoken to
// only in 2026-07-28 (protocol: "2026"), so older callers are bridged through
// input_required rather than served by a second, legacy connection.
func fidModernStdioUpstream(t *testing.T, name string) *fidUpstream {
	t.Helper()
	return fidChild(t, name, ", MCPGW_TEST_FIDELITY_MODERN: 1", `protocol: "2026"`)
}

func fidChild(t *testing.T, name, env string, extra ...string) *fidUpstream {
	t.Helper()
	dir := t.TempDir()
	// GORACE: a -race child otherwise sleeps 1s at exit, slowing every shutdown.
	entry := fmt.Sprintf("  %s:\n    command: [%q]\n    env: {MCPGW_TEST_FIDELITY_SERVER: %s, MCPGW_TEST_FIDELITY_DIR: %q, GORACE: atexit_sleep_ms=0%s}\n",
		name, stdioUpstream(t), name, dir, env)
	for _, e := range extra {
		entry += "    " + e + "\n"
	}
	return &fidUpstream{name: name, stdio: true, log: &fidFileLog{path: filepath.Join(dir, "events.log")}, entry: entry}
}

// fidGateway starts a gateway over ups; routes is the YAML of routes: (""
// for the default single prefixed /mcp).
func fidGateway(t *testing.T, routes string, ups ...*fidUpstream) string {
	t.Helper()
	_, base := fidGatewayGW(t, routes, ups...)
	return base
}

func fidGatewayGW(t *testing.T, routes string, ups ...*fidUpstream) (*gateway.Gateway, string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nupstreams:\n")
	for _, u := range ups {
		b.WriteString(u.entry)
	}
	if routes != "" {
		b.WriteString("routes:\n" + routes)
	}
	return startGateway(t, b.String())
}
