package gatewaytest

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

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fidEventLog records what the upstream saw: "start <tag>", "cancel <tag>",
// "subscribe <uri>", "unsubscribe <uri>".
type fidEventLog interface {
	Record(ev string)
	All() []string
}

// FidMemLog is the in-process log; each record is also signalled on Events.
type FidMemLog struct {
	mu     sync.Mutex
	evs    []string
	Events chan string
}

func NewFidMemLog() *FidMemLog { return &FidMemLog{Events: make(chan string, 256)} }

func (l *FidMemLog) Record(ev string) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
	select {
	case l.Events <- ev:
	default:
	}
}

func (l *FidMemLog) All() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

// fidFileLog is the stdio child's log: one line per record, appended.
type fidFileLog struct {
	mu   sync.Mutex
	path string
}

func (l *fidFileLog) Record(ev string) {
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

func (l *fidFileLog) All() []string {
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

func (b *fidBarrier) Await(ctx context.Context) error {
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

func FidResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func FidErrorResult(format string, args ...any) *mcp.CallToolResult {
	r := FidResult(format, args...)
	r.IsError = true
	return r
}

// FidLegacyVersions are the SDK's protocol revisions before 2026-07-28:
// the ones with sessions, server→client requests during a call,
// logging/setLevel and resources/subscribe.
func FidLegacyVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= "2026-07-28" })
}

// FidelityServer builds the fidelity upstream. bar, when set, is the
// barrier "sample" and "elicit" calls with barrier:true meet at. Unless
// modern is set the server offers only the legacy revisions, so that the
// gateway speaks one of them to it: its tools use req.Session.CreateMessage,
// Elicit and ListRoots, which the SDK refuses on a 2026-07-28 session.
func FidelityServer(name string, rec fidEventLog, bar *fidBarrier, modern bool) *mcp.Server {
	var versions []string
	if !modern {
		versions = FidLegacyVersions()
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fidelity-" + name, Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			rec.Record("subscribe " + req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			rec.Record("unsubscribe " + req.Params.URI)
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
		return bar.Await(ctx)
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
			return FidErrorResult("%v", err), nil, nil
		}
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			MaxTokens: 16,
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "question from " + in.Tag}}},
		})
		if err != nil {
			return FidErrorResult("sampling failed: %v", err), nil, nil
		}
		text := ""
		if tc, ok := res.Content.(*mcp.TextContent); ok {
			text = tc.Text
		}
		return FidResult("tag=%s answer=%s", in.Tag, text), nil, nil
	})

	// caps reports the client capabilities this connection was initialized
	// with: what the upstream believes about its caller.
	mcp.AddTool(srv, &mcp.Tool{Name: "caps"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c := req.Session.InitializeParams().Capabilities
		if c == nil {
			c = &mcp.ClientCapabilities{}
		}
		return FidResult("sampling=%v elicitation=%v", c.Sampling != nil, c.Elicitation != nil), nil, nil
	})

	type elicitIn struct {
		Tag     string `json:"tag"`
		Barrier bool   `json:"barrier,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "elicit"}, func(ctx context.Context, req *mcp.CallToolRequest, in elicitIn) (*mcp.CallToolResult, any, error) {
		if err := meet(ctx, in.Barrier); err != nil {
			return FidErrorResult("%v", err), nil, nil
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
			return FidErrorResult("elicitation failed: %v", err), nil, nil
		}
		return FidResult("tag=%s action=%s name=%v", in.Tag, res.Action, res.Content["name"]), nil, nil
	})

	type tagIn struct {
		Tag string `json:"tag"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, in tagIn) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return FidErrorResult("roots/list failed: %v", err), nil, nil
		}
		var parts []string
		for _, r := range res.Roots {
			parts = append(parts, r.URI+"|"+r.Name)
		}
		return FidResult("%s", strings.Join(parts, ",")), nil, nil
	})

	mcp.AddTool(srv, &mcp.Tool{Name: "log"}, func(ctx context.Context, req *mcp.CallToolRequest, in tagIn) (*mcp.CallToolResult, any, error) {
		for _, level := range []mcp.LoggingLevel{"info", "error"} {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "fidelity", Data: in.Tag + " " + string(level)}); err != nil {
				return FidErrorResult("log: %v", err), nil, nil
			}
		}
		return FidResult("logged %s", in.Tag), nil, nil
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
		return FidResult("released %s", in.Tag), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, in blockIn) (*mcp.CallToolResult, any, error) {
		rec.Record("start " + in.Tag)
		var until <-chan struct{}
		var timer <-chan time.Time
		if in.Hold {
			until = releaseOf(in.Tag)
		} else {
			timer = time.After(time.Duration(in.MS) * time.Millisecond) // the behaviour under test: a tool that takes ms
		}
		select {
		case <-until:
			rec.Record("finish " + in.Tag)
			return FidResult("done %s", in.Tag), nil, nil
		case <-timer:
			rec.Record("finish " + in.Tag)
			return FidResult("done %s", in.Tag), nil, nil
		case <-ctx.Done():
			rec.Record("cancel " + in.Tag)
			return nil, nil, ctx.Err()
		}
	})

	type growIn struct {
		Name string `json:"name"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "grow"}, func(_ context.Context, _ *mcp.CallToolRequest, in growIn) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(srv, &mcp.Tool{Name: in.Name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return FidResult("%s/%s", name, in.Name), nil, nil
		})
		return FidResult("grown %s", in.Name), nil, nil
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
			return FidResult("tag=%s answer=%s", in.Tag, text), nil, nil
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
			return FidErrorResult("resource updated: %v", err), nil, nil
		}
		return FidResult("touched %s", in.URI), nil, nil
	})

	srv.AddResource(&mcp.Resource{URI: "mem://watched", Name: "watched"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "watched of " + name}}}, nil
		})
	return srv
}

// FidUpstream is one fidelity upstream as a gateway config entry.
type FidUpstream struct {
	Name  string
	Stdio bool
	Srv   *mcp.Server // in-process (HTTP) only
	Bar   *fidBarrier // in-process (HTTP) only
	Log   fidEventLog
	Entry string // the YAML under upstreams:
}

// FidHTTPUpstream serves a fidelity server over Streamable HTTP on loopback;
// extra is YAML appended to its config entry (indented 4 spaces).
func FidHTTPUpstream(t *testing.T, name string, barrier int, extra ...string) *FidUpstream {
	t.Helper()
	rec := NewFidMemLog()
	var bar *fidBarrier
	if barrier > 0 {
		bar = newFidBarrier(barrier)
	}
	srv := FidelityServer(name, rec, bar, false)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	entry := fmt.Sprintf("  %s:\n    url: %s/mcp\n", name, ts.URL)
	for _, e := range extra {
		entry += "    " + e + "\n"
	}
	return &FidUpstream{Name: name, Srv: srv, Bar: bar, Log: rec, Entry: entry}
}

// FidStdioUpstream runs a fidelity server as a stdio child of the gateway.
func FidStdioUpstream(t *testing.T, name string, extra ...string) *FidUpstream {
	t.Helper()
	return fidChild(t, name, "", extra...)
}

// FidModernStdioUpstream is a stdio fidelity server that also offers
// 2026-07-28, as the SDK does by default.
// FidModernStdioUpstream is a stdio upstream offering 2026-07-28, spoken to
// only in 2026-07-28 (protocol: "2026"), so older callers are bridged through
// input_required rather than served by a second, legacy connection.
func FidModernStdioUpstream(t *testing.T, name string) *FidUpstream {
	t.Helper()
	return fidChild(t, name, ", MCPGW_TEST_FIDELITY_MODERN: 1", `protocol: "2026"`)
}

func fidChild(t *testing.T, name, env string, extra ...string) *FidUpstream {
	t.Helper()
	dir := t.TempDir()
	// GORACE: a -race child otherwise sleeps 1s at exit, slowing every shutdown.
	entry := fmt.Sprintf("  %s:\n    command: [%q]\n    env: {MCPGW_TEST_FIDELITY_SERVER: %s, MCPGW_TEST_FIDELITY_DIR: %q, GORACE: atexit_sleep_ms=0%s}\n",
		name, StdioUpstream(t), name, dir, env)
	for _, e := range extra {
		entry += "    " + e + "\n"
	}
	return &FidUpstream{Name: name, Stdio: true, Log: &fidFileLog{path: filepath.Join(dir, "events.log")}, Entry: entry}
}

// FidGateway starts a gateway over ups; routes is the YAML of routes: (""
// for the default single prefixed /mcp).
func FidGateway(t *testing.T, routes string, ups ...*FidUpstream) string {
	t.Helper()
	_, base := FidGatewayGW(t, routes, ups...)
	return base
}

func FidGatewayGW(t *testing.T, routes string, ups ...*FidUpstream) (*gateway.Gateway, string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nupstreams:\n")
	for _, u := range ups {
		b.WriteString(u.Entry)
	}
	if routes != "" {
		b.WriteString("routes:\n" + routes)
	}
	return StartGateway(t, b.String())
}

// FidConnect opens an official-SDK client session (2025-11-25) to url,
// offering roots when given.
func FidConnect(t *testing.T, url string, opts *mcp.ClientOptions, roots ...*mcp.Root) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "fidelity-client", Version: "1"}, opts)
	if len(roots) > 0 {
		c.AddRoots(roots...)
	}
	// A transport of its own, whose idle connections are closed once the
	// session is: a pooled connection that never carried a request holds
	// the gateway's http.Server.Shutdown for 5s.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: tr}},
		&mcp.ClientSessionOptions{ProtocolVersion: FidVersion})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != FidVersion {
		t.Fatalf("negotiated %q, want %q", got, FidVersion)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// FidCall calls a tool and returns its text and whether it is an error result.
func FidCall(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, ""), res.IsError, nil
}

// FidExpect calls a tool and checks its text.
func FidExpect(ctx context.Context, t *testing.T, who string, cs *mcp.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	got, isErr, err := FidCall(ctx, cs, name, args)
	switch {
	case err != nil:
		t.Errorf("%s: %s: %v", who, name, err)
	case isErr || got != want:
		t.Errorf("%s: %s = %q (isError %v), want %q", who, name, got, isErr, want)
	}
}

// FidInbox collects what a client's handlers saw.
type FidInbox struct {
	mu    sync.Mutex
	items []string
}

func (b *FidInbox) Add(s string) {
	b.mu.Lock()
	b.items = append(b.items, s)
	b.mu.Unlock()
}

func (b *FidInbox) Get() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.items)
}

// fidSorted is the inbox Sorted: the SDK client runs notification handlers
// asynchronously, so their order is not the wire order.
func (b *FidInbox) Sorted() []string {
	s := b.Get()
	slices.Sort(s)
	return s
}

// FidGather waits (bounded) until every inbox holds what is wanted, then a
// little longer so that anything extra or foreign would show up too, and
// returns what each inbox holds, sorted.
func FidGather(inboxes map[string]*FidInbox, want map[string][]string) map[string][]string {
	sortedWant := map[string][]string{}
	for k := range inboxes {
		w := slices.Clone(want[k])
		slices.Sort(w)
		sortedWant[k] = w
	}
	deadline := time.Now().Add(testwait.Long) // returns as soon as all is there
	for time.Now().Before(deadline) {
		ok := true
		for k, ib := range inboxes {
			if !slices.Equal(ib.Sorted(), sortedWant[k]) {
				ok = false
			}
		}
		if ok {
			break
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	// A negative check (nothing more arrives): a wait cut short by load
	// only misses a failure, never makes one.
	time.Sleep(150 * time.Millisecond)
	got := map[string][]string{}
	for k, ib := range inboxes {
		got[k] = ib.Sorted()
	}
	return got
}

// FidSettle is FidGather followed by FidCompare.
func FidSettle(t *testing.T, inboxes map[string]*FidInbox, want map[string][]string) {
	t.Helper()
	FidCompare(t, FidGather(inboxes, want), want)
}

// FidCompare checks what each session received (got is sorted).
func FidCompare(t *testing.T, got, want map[string][]string) {
	t.Helper()
	for k := range got {
		w := slices.Clone(want[k])
		slices.Sort(w)
		if !slices.Equal(got[k], w) {
			t.Errorf("session %s received %q, want %q", k, got[k], w)
		}
	}
}

// FidWaitEvent waits (bounded) until the upstream recorded ev; in process
// it wakes on the log's channel, for a stdio child it polls the log file.
func FidWaitEvent(up *FidUpstream, ev string, d time.Duration) bool {
	var wake <-chan string
	if m, ok := up.Log.(*FidMemLog); ok {
		wake = m.Events
	}
	deadline := time.After(d) // the caller's bound on the event
	for {
		if slices.Contains(up.Log.All(), ev) {
			return true
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Millisecond): // a poll of the log file, bounded by deadline
		case <-deadline:
			return false
		}
	}
}

func FidCount(evs []string, ev string) int {
	n := 0
	for _, e := range evs {
		if e == ev {
			n++
		}
	}
	return n
}

// FidEachKind runs body against an HTTP and a stdio fidelity upstream, the
// two at once: each has a gateway and an upstream of its own.
func FidEachKind(t *testing.T, body func(t *testing.T, stdio bool)) {
	fidKinds(t, true, body)
}

// FidEachKindInTurn is FidEachKind one kind after the other, for a test
// whose timing must not share the machine.
func FidEachKindInTurn(t *testing.T, body func(t *testing.T, stdio bool)) {
	fidKinds(t, false, body)
}

func fidKinds(t *testing.T, parallel bool, body func(t *testing.T, stdio bool)) {
	for _, stdio := range []bool{false, true} {
		name := "http"
		if stdio {
			name = "stdio"
		}
		t.Run(name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			body(t, stdio)
		})
	}
}

// FidUp builds a fidelity upstream of the kind asked for; barrier applies
// to the in-process (HTTP) one only.
func FidUp(t *testing.T, stdio bool, name string, barrier int, extra ...string) *FidUpstream {
	t.Helper()
	if stdio {
		return FidStdioUpstream(t, name, extra...)
	}
	return FidHTTPUpstream(t, name, barrier, extra...)
}

// FidRun runs the sessions' calls: concurrently on an HTTP upstream, one
// after the other on a stdio upstream (where the gateway can only relay to
// the single interactive call in flight).
func FidRun(stdio bool, calls ...func()) {
	if stdio {
		for _, c := range calls {
			c()
		}
		return
	}
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c()
		}()
	}
	wg.Wait()
}

func FidSampler(name string, inbox *FidInbox) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			var q string
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					q = tc.Text
				}
			}
			inbox.Add(q)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "model-" + name, Content: &mcp.TextContent{Text: "answer-from-" + name}}, nil
		},
	}
}

// FidVersion is the revision the fidelity tests speak unless they say otherwise.
const FidVersion = "2025-11-25"
