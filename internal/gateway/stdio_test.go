package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// stdioGateway runs gateway.ServeStdio over pipes. It returns the client's
// ends (write requests to in, read lines from out) and a channel with
// ServeStdio's result; out is closed once ServeStdio returns.
func stdioGateway(t *testing.T, yaml, route string) (in *io.PipeWriter, out *io.PipeReader, done <-chan error) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	res := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		err := gateway.ServeStdio(context.Background(), cfg, gateway.Options{Logger: zaptest.NewLogger(t)}, route, inR, outW)
		outW.Close()
		res <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // let what is still written go
		select {
		case <-finished:
		case <-time.After(10 * time.Second): // a bound on the event, far above its time
			t.Error("ServeStdio did not return after stdin closed")
		}
	})
	return inW, outR, res
}

// stdioYAML is a gateway over alpha (the shared test server) and peer
// (legacyPeerServer), both official-SDK Streamable HTTP upstreams.
func stdioYAML(t *testing.T) string {
	t.Helper()
	alpha := httpUpstream(t, "alpha", 2)
	peer := legacyPeerServer(make(chan string, 8), make(chan string, 8))
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return peer }, nil))
	t.Cleanup(ts.Close)
	return fmt.Sprintf(`
upstreams:
  alpha:
    url: %s
  peer:
    url: %s/mcp
routes:
  - path: /mcp
  - path: /mcp/alpha
    upstreams: [alpha]
    prefix: false
`, alpha, ts.URL)
}

// The official SDK client over newline-delimited stdio pipes into
// gateway.ServeStdio: lists, calls, progress, sampling, concurrency, and a
// clean return when the client closes stdin.
func TestStdioSDKClient(t *testing.T) {
	t.Parallel()
	in, out, done := stdioGateway(t, stdioYAML(t), "")
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
	if got := textOf(t, res); got != "alpha:hi" {
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
	if got := textOf(t, res); got != "answer=saw q" {
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
			if got := textOf(t, res); got != "alpha:"+text {
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

// prettyUpstream is a scripted Streamable HTTP upstream whose results are
// pretty-printed over several lines, as some servers write them.
func prettyUpstream(t *testing.T) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil || m.Kind() != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		res := map[string]string{
			"initialize": `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"pretty","version":"1"}}`,
			"tools/list": "{\n  \"tools\": [\n    {\"name\": \"pretty\", \"inputSchema\": {\"type\": \"object\"}}\n  ]\n}",
			"tools/call": "{\r\n  \"content\": [\r\n    {\"type\": \"text\", \"text\": \"line1\\nline2 \\u2028\"}\r\n  ],\r\n  \"x\": 1.50\r\n}",
		}[m.Method]
		w.Header().Set("Content-Type", "application/json")
		if res == "" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no script"}}`, m.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, res)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// stdioRaw sends lines and reads the answers of a ServeStdio over pipes.
type stdioRaw struct {
	t   *testing.T
	in  io.Writer
	out *bufio.Reader
}

func (s *stdioRaw) send(lines ...string) {
	s.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(s.in, l+"\n"); err != nil {
			s.t.Fatal(err)
		}
	}
}

// next reads one line and parses it, skipping list_changed hints.
func (s *stdioRaw) next() (*jsonrpc.Message, []byte) {
	s.t.Helper()
	for {
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			s.t.Fatalf("reading stdout: %v (got %q)", err, line)
		}
		m, err := jsonrpc.Parse(line)
		if err != nil {
			s.t.Fatalf("stdout line %q: %v", line, err)
		}
		if strings.HasSuffix(m.Method, "/list_changed") {
			continue
		}
		return m, line
	}
}

func TestStdioWire(t *testing.T) {
	t.Parallel()
	yaml := fmt.Sprintf("max_body_bytes: 4096\nupstreams:\n  pp:\n    url: %s\n", prettyUpstream(t))
	in, out, done := stdioGateway(t, yaml, "")
	s := &stdioRaw{t: t, in: in, out: bufio.NewReader(out)}

	// Blank lines are skipped; what is not JSON-RPC is answered.
	s.send("", "   ", "not json")
	if m, _ := s.next(); m.Error == nil || m.Error.Code != jsonrpc.CodeParseError || string(m.ID) != "null" {
		t.Errorf("not json: %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":5,"method":7}`)
	if m, _ := s.next(); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest {
		t.Errorf("bad method: %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`)
	if m, _ := s.next(); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, "max_body_bytes") {
		t.Errorf("oversized line: %+v", m)
	}
	// Requests wait for initialize; server/discover is a 2026-07-28
	// request, which must carry its _meta (stdio2026_test.go has the rest).
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if m, _ := s.next(); m.Error == nil || string(m.ID) != "1" {
		t.Errorf("tools/list before initialize: %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{}}`)
	if m, _ := s.next(); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "_meta") {
		t.Errorf("server/discover without _meta: %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if m, _ := s.next(); m.Error != nil || !strings.Contains(string(m.Result), `"protocolVersion":"2024-11-05"`) {
		t.Fatalf("initialize: %+v %s", m.Error, m.Result)
	}

	// Pretty-printed upstream results go out on one line, compacted and
	// otherwise unchanged.
	s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pp__pretty"}}`)
	m, line := s.next()
	if bytes.Count(line, []byte("\n")) != 1 || bytes.ContainsRune(line, '\r') {
		t.Errorf("response is not one line: %q", line)
	}
	if want := `{"content":[{"type":"text","text":"line1\nline2 \u2028"}],"x":1.50}`; string(m.Result) != want {
		t.Errorf("result = %s\nwant     %s", m.Result, want)
	}
	s.send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	if m, line := s.next(); !strings.Contains(string(m.Result), `"name":"pp__pretty"`) || bytes.Count(line, []byte("\n")) != 1 {
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
	in, out, done := stdioGateway(t, stdioYAML(t), "")
	s := &stdioRaw{t: t, in: in, out: bufio.NewReader(out)}
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"raw","version":"0"}}}`)
	s.next()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":300}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"peer__ask","arguments":{"tag":"late"}}}`)
	in.Close()
	answers := map[string]string{}
	for len(answers) < 2 {
		m, line := s.next()
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
	if _, err := s.out.ReadByte(); err != io.EOF {
		t.Errorf("stdout not closed after ServeStdio returned: %v", err)
	}
}

func TestStdioRouteFlag(t *testing.T) {
	t.Parallel()
	in, out, _ := stdioGateway(t, stdioYAML(t), "/mcp/alpha")
	s := &stdioRaw{t: t, in: in, out: bufio.NewReader(out)}
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"r"}}}`)
	s.next()
	if m, _ := s.next(); !strings.Contains(string(m.Result), "alpha:r") {
		t.Errorf("echo on /mcp/alpha: %s %+v", m.Result, m.Error)
	}

	cfg, err := config.Parse("test.yaml", []byte(stdioYAML(t)), func(string) (string, bool) { return "", false })
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
