package serial_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// The official SDK client over newline-delimited stdio pipes into
// gateway.ServeStdio: lists, calls, progress, sampling, concurrency, and a
// clean return when the client closes stdin.
func TestStdioSDKClient(t *testing.T) {
	t.Parallel()
	in, out, done := gatewaytest.StdioGateway(t, gatewaytest.StdioYAML(t), "")
	var mu sync.Mutex
	var progress []string
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			q := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "saw " + q}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The SDK closes its reader on Close; keep the pipe open so that
	// ServeStdio's result reflects stdin's EOF alone.
	// A session (initialize): the SDK's default would discover 2026-07-28
	// now, which TestStdio2026SDKClient covers.
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(out), Writer: in}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated %q", v)
	}

	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if len(names) != 12 || names[0] != "alpha__echo" {
		t.Errorf("tools = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gatewaytest.TextOf(t, res); got != "alpha:hi" {
		t.Errorf("alpha__echo = %q", got)
	}

	params := &mcp.CallToolParams{Name: "alpha__progress", Arguments: map[string]any{"tag": "stdio"}}
	params.SetProgressToken(7)
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "peer__ask", Arguments: map[string]any{"tag": "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gatewaytest.TextOf(t, res); got != "answer=saw q" {
		t.Errorf("peer__ask = %q", got)
	}

	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := fmt.Sprintf("c%d", i)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"text": text}})
			if err != nil {
				t.Errorf("%s: %v", text, err)
				return
			}
			if got := gatewaytest.TextOf(t, res); got != "alpha:"+text {
				t.Errorf("call %s answered %q", text, got)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	if len(progress) != 3 || progress[0] != "stdio" {
		t.Errorf("progress = %v", progress)
	}
	mu.Unlock()

	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio after EOF: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("ServeStdio did not return after stdin closed")
	}
}

func TestStdioWire(t *testing.T) {
	t.Parallel()
	yaml := fmt.Sprintf("max_body_bytes: 4096\nupstreams:\n  pp:\n    url: %s\n", gatewaytest.PrettyUpstream(t))
	in, out, done := gatewaytest.StdioGateway(t, yaml, "")
	s := &gatewaytest.StdioRaw{T: t, In: in, Out: bufio.NewReader(out)}

	// Blank lines are skipped; what is not JSON-RPC is answered.
	s.Send("", "   ", "not json")
	if m, _ := s.Next(); m.Error == nil || m.Error.Code != jsonrpc.CodeParseError || string(m.ID) != "null" {
		t.Errorf("not json: %+v", m)
	}
	s.Send(`{"jsonrpc":"2.0","id":5,"method":7}`)
	if m, _ := s.Next(); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest {
		t.Errorf("bad method: %+v", m)
	}
	s.Send(`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`)
	if m, _ := s.Next(); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, "max_body_bytes") {
		t.Errorf("oversized line: %+v", m)
	}
	// Requests wait for initialize; server/discover is a 2026-07-28
	// request, which must carry its _meta (stdio2026_test.go has the rest).
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if m, _ := s.Next(); m.Error == nil || string(m.ID) != "1" {
		t.Errorf("tools/list before initialize: %+v", m)
	}
	s.Send(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{}}`)
	if m, _ := s.Next(); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "_meta") {
		t.Errorf("server/discover without _meta: %+v", m)
	}
	s.Send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if m, _ := s.Next(); m.Error != nil || !strings.Contains(string(m.Result), `"protocolVersion":"2024-11-05"`) {
		t.Fatalf("initialize: %+v %s", m.Error, m.Result)
	}

	// Pretty-printed upstream results go out on one line, compacted and
	// otherwise unchanged.
	s.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pp__pretty"}}`)
	m, line := s.Next()
	if bytes.Count(line, []byte("\n")) != 1 || bytes.ContainsRune(line, '\r') {
		t.Errorf("response is not one line: %q", line)
	}
	if want := `{"content":[{"type":"text","text":"line1\nline2 \u2028"}],"x":1.50}`; string(m.Result) != want {
		t.Errorf("result = %s\nwant     %s", m.Result, want)
	}
	s.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	if m, line := s.Next(); !strings.Contains(string(m.Result), `"name":"pp__pretty"`) || bytes.Count(line, []byte("\n")) != 1 {
		t.Errorf("tools/list = %q", line)
	}

	in.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("ServeStdio did not return at EOF")
	}
}

// At EOF, requests already read still get their answers before ServeStdio
// returns; a server→client request the client can no longer answer fails
// at once instead of holding its call.
func TestStdioEOFAnswersInFlight(t *testing.T) {
	t.Parallel()
	in, out, done := gatewaytest.StdioGateway(t, gatewaytest.StdioYAML(t), "")
	s := &gatewaytest.StdioRaw{T: t, In: in, Out: bufio.NewReader(out)}
	s.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"raw","version":"0"}}}`)
	s.Next()
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":300}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"peer__ask","arguments":{"tag":"late"}}}`)
	in.Close()
	answers := map[string]string{}
	for len(answers) < 2 {
		m, line := s.Next()
		switch {
		case m.Kind() == jsonrpc.KindRequest && m.Method == "sampling/createMessage":
			// Relayed, but nobody can answer any more.
		case m.Kind() == jsonrpc.KindResponse:
			answers[string(m.ID)] = string(line)
		}
	}
	if !strings.Contains(answers["1"], `"text":"done"`) {
		t.Errorf("slow call: %s", answers["1"])
	}
	if !strings.Contains(answers["2"], "sampling failed") || !strings.Contains(answers["2"], "closed its input") {
		t.Errorf("sampling call: %s", answers["2"])
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("ServeStdio did not return at EOF")
	}
	if _, err := s.Out.ReadByte(); err != io.EOF {
		t.Errorf("stdout not closed after ServeStdio returned: %v", err)
	}
}

func TestStdioRouteFlag(t *testing.T) {
	t.Parallel()
	in, out, _ := gatewaytest.StdioGateway(t, gatewaytest.StdioYAML(t), "/mcp/alpha")
	s := &gatewaytest.StdioRaw{T: t, In: in, Out: bufio.NewReader(out)}
	s.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"r"}}}`)
	s.Next()
	if m, _ := s.Next(); !strings.Contains(string(m.Result), "alpha:r") {
		t.Errorf("echo on /mcp/alpha: %s %+v", m.Result, m.Error)
	}

	cfg, err := config.Parse("test.yaml", []byte(gatewaytest.StdioYAML(t)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	err = gateway.ServeStdio(context.Background(), cfg, gateway.Options{}, "/nope", strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "/mcp/alpha") {
		t.Errorf("unknown route: %v", err)
	}
}

// The real binary: `mcpgw stdio --config FILE` launched by the official
// SDK's CommandTransport, as an MCP host launches stdio servers. Closing
// the session closes the child's stdin, and the child must exit on its own.
func TestStdioCommand(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the mcpgw binary")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "mcpgw")
	build := exec.Command("go", "build", "-o", exe, "github.com/mcpgw/mcpgw/cmd/mcpgw")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	cfgPath := filepath.Join(dir, "mcpgw.yaml")
	// The upstream is mcpgw's own demo server, a stdio child of the child.
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("upstreams:\n  demo:\n    command: [%q, demo-server]\nroutes:\n  - path: /mcp\n", exe)), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(exe, "stdio", "--config", cfgPath, "--log-format", "json")
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The SDK's default revision is 2026-07-28: it discovers, and with a
	// list-change handler it keeps a subscriptions/listen stream open,
	// which its Close cancels.
	c := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr.String())
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %q with mcpgw stdio, want 2026-07-28", v)
	}
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "demo__add,demo__echo,demo__sleep" {
		t.Errorf("tools = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__add", Arguments: map[string]any{"a": 2, "b": 3}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if string(sc) != `{"sum":5}` {
		t.Errorf("demo__add structured content = %s", sc)
	}

	// Close closes stdin and waits for the process; it sends SIGTERM only
	// after TerminateDuration, so a quick, clean exit proves EOF ends it.
	start := time.Now()
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("the process took %v to exit after stdin closed", d)
	}
	if !cmd.ProcessState.Exited() || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("process state %v\nstderr: %s", cmd.ProcessState, stderr.String())
	}
	// Logs went to stderr, as JSON lines.
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if l != "" && !json.Valid([]byte(l)) {
			t.Errorf("stderr line is not a JSON log line: %q", l)
		}
	}
	if !strings.Contains(stderr.String(), "serving MCP on stdio") {
		t.Errorf("stderr holds no startup log: %s", stderr.String())
	}
}
