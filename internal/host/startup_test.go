package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// probeDumpLines is how many stderr lines the pyprobe child writes in
// answer to server/discover (a Python-SDK 1.x server's validation dump).
const probeDumpLines = 40

// servePyProbe is a legacy (initialize-only) stdio server that answers
// server/discover the way Python-SDK 1.x servers do: a multi-line
// validation dump on stderr, then -32602. Its one tool, crash, writes
// MCPGW_HOST_TEST_CRASH_SAY on stderr (when set) and exits 1. With
// MCPGW_HOST_TEST_DIE_ON_PROBE set it exits after the dump instead.
func servePyProbe() {
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, member, body string) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,%q:%s}`+"\n", id, member, body)
		_ = out.Flush()
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue // notifications
		}
		switch m.Method {
		case mcp.MethodServerDiscover:
			fmt.Fprintf(os.Stderr, "WARNING:root:Failed to validate request: %d validation errors for ClientRequest\n", probeDumpLines-1)
			for i := 1; i < probeDumpLines; i++ {
				fmt.Fprintf(os.Stderr, "  Request%d.method: Input should be 'method%d' [type=literal_error]\n", i, i)
			}
			if os.Getenv("MCPGW_HOST_TEST_DIE_ON_PROBE") != "" {
				os.Exit(1)
			}
			reply(m.ID, "error", `{"code":-32602,"message":"Invalid request parameters","data":""}`)
		case mcp.MethodInitialize:
			reply(m.ID, "result", `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"pyprobe","version":"1"}}`)
		case mcp.MethodToolsList:
			reply(m.ID, "result", `{"tools":[{"name":"crash","inputSchema":{"type":"object"}}]}`)
		case mcp.MethodToolsCall:
			if say := os.Getenv("MCPGW_HOST_TEST_CRASH_SAY"); say != "" {
				fmt.Fprintln(os.Stderr, say)
			}
			os.Exit(1)
		case mcp.MethodPing:
			reply(m.ID, "result", `{}`)
		default:
			reply(m.ID, "error", `{"code":-32601,"message":"Method not found"}`)
		}
	}
}

// floodStderr writes MCPGW_HOST_TEST_FLOOD_LINES lines on stderr as fast as
// it can: first one of 100 kB (to be clipped), then short ones.
func floodStderr() {
	n, _ := strconv.Atoi(os.Getenv("MCPGW_HOST_TEST_FLOOD_LINES"))
	w := bufio.NewWriterSize(os.Stderr, 64<<10)
	fmt.Fprintf(w, "%s\n", strings.Repeat("é", 50_000))
	for i := 1; i < n; i++ {
		fmt.Fprintf(w, "flood line %d: the quick brown fox jumps over the lazy dog\n", i)
	}
	_ = w.Flush()
}

// multiConfig is a config with one test-binary child per entry of modes
// (upstream name -> mode), each with the extra YAML lines given.
func multiConfig(t *testing.T, modes map[string]string, env map[string]string, extra map[string]string) *config.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("upstreams:\n")
	for _, name := range slices.Sorted(maps.Keys(modes)) {
		e := map[string]string{"MCPGW_HOST_TEST_CHILD": modes[name]}
		for k, v := range env {
			e[k] = v
		}
		envJSON, _ := json.Marshal(e)
		fmt.Fprintf(&b, "  %s:\n    command: [%q]\n    env: %s\n", name, exe, envJSON)
		for _, line := range strings.Split(extra[name], "\n") {
			if line != "" {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
	}
	cfg, err := config.Parse("test.yaml", []byte(b.String()), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return cfg
}

func toolNames(t *testing.T, page json.RawMessage) []string {
	t.Helper()
	arr, _ := rawjson.Get(page, "tools")
	items, err := rawjson.Elements(arr)
	if err != nil {
		t.Fatalf("tools/list page %s: %v", page, err)
	}
	var names []string
	for _, it := range items {
		n, _ := rawjson.GetString(it, "name")
		names = append(names, n)
	}
	return names
}

func hasPrefixed(names []string, upstream string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, upstream+"__") })
}

type stateEvent struct {
	upstream string
	state    host.State
	changes  []string
}

// A hung upstream beside a working one: the first tools/list is answered
// without waiting for the hung one beyond startup_list_wait, with the
// working one's tools; a late one that arrives afterwards is announced
// (the state change that the gateway turns into list_changed, for the
// lists it offers) and listed; a first attempt that fails changes no list,
// and its error names startup_timeout.
func TestFirstListDoesNotWaitForHungUpstream(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	cfg := multiConfig(t,
		map[string]string{"hung": "sleep", "late": "late", "works": "demo"},
		map[string]string{"MCPGW_HOST_TEST_RELEASE": release},
		map[string]string{
			"hung": "startup_list_wait: 300ms\nstartup_timeout: 1500ms",
			"late": "startup_list_wait: 300ms",
		})
	events := make(chan stateEvent, 16)
	var h *host.Host
	h = host.New(cfg, host.Options{
		Logger: zaptest.NewLogger(t),
		OnStateChange: func(upstream string, s host.State) {
			events <- stateEvent{upstream, s, h.Upstream(upstream).ListChanges()}
		},
		MinBackoff: time.Minute, // one attempt each: the test watches the first
	})
	h.Start()
	defer h.Close()

	// The bound is generous (3s, the issue's); what is proven is that the
	// list is not held for the hung upstream's 1.5s startup_timeout... and
	// that it holds the working upstream's tools.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	page, jerr := catalog.NewView(h, nil, true).List(ctx, catalog.Tools, nil)
	if jerr != nil {
		t.Fatalf("first tools/list: %v", jerr)
	}
	names := toolNames(t, page)
	if !hasPrefixed(names, "works") || hasPrefixed(names, "late") || hasPrefixed(names, "hung") {
		t.Fatalf("first tools/list = %v, want the tools of works only", names)
	}
	if s, _ := h.Upstream("late").State(); s != host.StateStarting {
		t.Fatalf("late is %s before its release", s)
	}

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var lateReady, hungDown *stateEvent
	for deadline := time.After(20 * time.Second); lateReady == nil || hungDown == nil; { // a bound on the events, far above their time
		select {
		case ev := <-events:
			switch {
			case ev.upstream == "late" && ev.state == host.StateReady:
				lateReady = &ev
			case ev.upstream == "hung" && ev.state == host.StateDown:
				hungDown = &ev
			}
		case <-deadline:
			t.Fatalf("no state change: late ready %v, hung down %v", lateReady, hungDown)
		}
	}
	want := []string{mcp.NotificationToolsListChanged, mcp.NotificationPromptsChanged, mcp.NotificationResourcesChanged}
	if !slices.Equal(lateReady.changes, want) {
		t.Errorf("late's arrival changes %v, want %v (the demo server offers all three lists)", lateReady.changes, want)
	}
	if len(hungDown.changes) != 0 {
		t.Errorf("hung's failed first attempt changes %v, want no list (it was never in one)", hungDown.changes)
	}
	_, err := h.Upstream("hung").State()
	if err == nil || !strings.Contains(err.Error(), "upstreams.hung.startup_timeout (1.5s)") {
		t.Errorf("hung's error = %v, want it to name upstreams.hung.startup_timeout (1.5s)", err)
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	page, jerr = catalog.NewView(h, nil, true).List(ctx2, catalog.Tools, nil)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if names := toolNames(t, page); !hasPrefixed(names, "late") {
		// One page per upstream today: late's page comes first.
		t.Errorf("tools/list after late's arrival = %v, want late's tools", names)
	}
}

// The handshake's error names the bound that fired: startup_timeout, not
// the per-request timeout, whichever handshake step was waiting.
func TestStartupErrorNamesStartupTimeout(t *testing.T) {
	for _, protocol := range []string{"legacy", "auto", "2026"} {
		t.Run(protocol, func(t *testing.T) {
			cfg := multiConfig(t, map[string]string{"hung": "sleep"}, nil,
				map[string]string{"hung": "protocol: \"" + protocol + "\"\nstartup_timeout: 300ms\ntimeout: 1m"})
			h := host.New(cfg, host.Options{Logger: zaptest.NewLogger(t), MinBackoff: time.Minute})
			h.Start()
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := h.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			s, err := h.Upstream("hung").State()
			if s != host.StateDown || err == nil {
				t.Fatalf("state %s (%v), want down", s, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "within upstreams.hung.startup_timeout (300ms)") || strings.Contains(msg, "1m0s") {
				t.Errorf("startup error %q, want it to name upstreams.hung.startup_timeout (300ms) and not the 1m timeout", msg)
			}
		})
	}
}

// observed returns a logger that records entries at level and above.
func observed(level zapcore.Level) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(level)
	return zap.New(core), logs
}

// A child flooding stderr: the lines logged are bounded by rate × time +
// burst, the rest are dropped, counted in the metric and summed up in the
// summary lines; a line longer than max_line_bytes is clipped.
func TestStderrFloodIsRateLimited(t *testing.T) {
	const lines, rate, burst, maxLine = 5000, 5, 10, 256
	cfg := multiConfig(t, map[string]string{"demo": "flood"},
		map[string]string{"MCPGW_HOST_TEST_FLOOD_LINES": strconv.Itoa(lines)},
		// protocol legacy: no probe, whose window would take in the flood
		// the child writes as it starts (TestProbeStderrNotInLastStderr).
		map[string]string{"demo": fmt.Sprintf("protocol: legacy\nstderr: {level: info, rate: %d/s, burst: %d, max_line_bytes: %d}", rate, burst, maxLine)})
	reg := prometheus.NewRegistry()
	log, logs := observed(zapcore.InfoLevel)
	start := time.Now()
	h := host.New(cfg, host.Options{Logger: log, Metrics: metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})})
	h.Start()
	count := func(outcome string) float64 {
		return value(t, reg, "mcpgw_upstream_stderr_lines_total", "upstream", "demo", "outcome", outcome)
	}
	waitFor(t, 20*time.Second, "every flood line to be read", func() bool {
		return count("logged")+count("dropped") == lines
	})
	elapsed := time.Since(start)
	logged, dropped := count("logged"), count("dropped")
	h.Close() // flushes the summary of the last drops
	t.Logf("%d lines in %s: %v logged, %v dropped", lines, elapsed.Round(time.Millisecond), logged, dropped)

	if bound := burst + rate*elapsed.Seconds(); logged > bound || logged < burst {
		t.Errorf("logged %v lines in %s, want from %d to rate×time+burst = %.1f", logged, elapsed, burst, bound)
	}
	if count("suppressed") != 0 {
		t.Errorf("suppressed = %v at level info, want 0", count("suppressed"))
	}
	var seen, summed int64
	var clipped bool
	for _, e := range logs.All() {
		switch {
		case e.Message == "child stderr":
			seen++
			line := e.ContextMap()["line"].(string)
			if len(line) > maxLine {
				t.Errorf("a logged line has %d bytes, over max_line_bytes %d", len(line), maxLine)
			}
			if from, ok := e.ContextMap()["clipped_from_bytes"]; ok {
				clipped = true
				if from != int64(100_000) || !strings.HasPrefix(line, "éé") || !utf8Valid(line) {
					t.Errorf("clipped line: %d bytes from %v, valid UTF-8 %v", len(line), from, utf8Valid(line))
				}
			}
		case strings.Contains(e.Message, "stderr lines dropped in the last"):
			if e.Level != zapcore.WarnLevel {
				t.Errorf("summary at %s, want warn", e.Level)
			}
			summed += e.ContextMap()["dropped"].(int64)
		}
	}
	if float64(seen) != logged {
		t.Errorf("%d child stderr entries in the log, metric says %v logged", seen, logged)
	}
	if float64(summed) != dropped || dropped < lines-burst-rate*elapsed.Seconds() {
		t.Errorf("summary lines report %d dropped, metric %v (of %d lines)", summed, dropped, lines)
	}
	if !clipped {
		t.Error("the 100 kB first line was not logged clipped")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// What a Python-SDK 1.x server writes on stderr in answer to the gateway's
// server/discover probe is logged at debug, counted as probe lines, and is
// not the "last stderr" of a later crash; the next connection initializes
// at once, without a probe; a child that dies answering the probe is
// explained by the probe's lines.
func TestProbeStderrNotInLastStderr(t *testing.T) {
	tests := []struct {
		name, say string
		wantTail  string // in the crash error; "" for none at all
	}{
		{"crash reason on stderr", "Traceback: disk full", "; last stderr: Traceback: disk full"},
		{"silent crash", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := multiConfig(t, map[string]string{"py": "pyprobe"},
				map[string]string{"MCPGW_HOST_TEST_CRASH_SAY": tc.say}, nil)
			reg := prometheus.NewRegistry()
			log, logs := observed(zapcore.InfoLevel)
			h := host.New(cfg, host.Options{Logger: log, Metrics: metrics.New(reg, metrics.Options{NoRuntimeCollectors: true}),
				MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
			h.Start()
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := h.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			u := h.Upstream("py")
			if s, err := u.State(); s != host.StateReady {
				t.Fatalf("state %s (%v)", s, err)
			}
			probe := func() float64 { return value(t, reg, "mcpgw_upstream_stderr_probe_lines_total", "upstream", "py") }
			waitFor(t, 5*time.Second, "the probe's lines", func() bool { return probe() == probeDumpLines })
			if got := value(t, reg, "mcpgw_upstream_stderr_lines_total", "upstream", "py", "outcome", "suppressed"); got != probeDumpLines {
				t.Errorf("suppressed lines = %v, want the %d probe lines (logged at debug)", got, probeDumpLines)
			}
			for _, e := range logs.All() {
				if e.Message == "child stderr" {
					t.Errorf("a probe line was logged at %s: %v", e.Level, e.ContextMap())
				}
			}

			pid := u.PID()
			resp, jerr := catalog.NewView(h, nil, true).Forward(telemetry.WithRequestRef(ctx, reqID("crash-1")), mcp.MethodToolsCall, json.RawMessage(`{"name":"py__crash","arguments":{}}`), client.CallOptions{})
			if jerr == nil {
				t.Fatalf("crash answered %s", resp.Result)
			}
			if strings.Contains(jerr.Message, "stderr") || tc.say != "" && strings.Contains(jerr.Message, tc.say) {
				t.Errorf("the caller's error quotes the child's stderr: %q", jerr.Message)
			}
			// The crash's cause is in the log, under the request's id.
			detail := failureDetail(logs, "crash-1")
			if strings.Contains(detail, "validation") || strings.Contains(detail, "Input should be") {
				t.Errorf("crash error quotes the probe's stderr: %q", detail)
			}
			switch {
			case tc.wantTail == "" && strings.Contains(detail, "last stderr"):
				t.Errorf("silent crash error %q has a last stderr", detail)
			case tc.wantTail != "" && !strings.Contains(detail, tc.wantTail):
				t.Errorf("crash error %q, want %q", detail, tc.wantTail)
			}

			// The restarted child is initialized at once: no probe, no dump.
			waitFor(t, 10*time.Second, "the child to be restarted", func() bool {
				s, _ := u.State()
				return s == host.StateReady && u.PID() != 0 && u.PID() != pid
			})
			if got := probe(); got != probeDumpLines {
				t.Errorf("probe lines after the restart = %v, want still %d (initialize first)", got, probeDumpLines)
			}
		})
	}

	t.Run("dies answering the probe", func(t *testing.T) {
		cfg := multiConfig(t, map[string]string{"py": "pyprobe"}, map[string]string{"MCPGW_HOST_TEST_DIE_ON_PROBE": "1"}, nil)
		h := host.New(cfg, host.Options{Logger: zaptest.NewLogger(t), MinBackoff: time.Minute})
		h.Start()
		defer h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := h.Upstream("py").State()
		if err == nil || !strings.Contains(err.Error(), "last stderr: ") || !strings.Contains(err.Error(), "Input should be") {
			t.Errorf("startup error %v, want the probe's lines as its last stderr", err)
		}
	})
}

// A stateful upstream's per-session children share the upstream's one
// stderr limit (the bound is per upstream, not per child).
func TestStderrLimitSharedByChildren(t *testing.T) {
	const lines, burst = 200, 30
	cfg := multiConfig(t, map[string]string{"demo": "flood"},
		map[string]string{"MCPGW_HOST_TEST_FLOOD_LINES": strconv.Itoa(lines)},
		map[string]string{"demo": fmt.Sprintf("stateful: true\nprotocol: legacy\nstderr: {rate: 1/h, burst: %d}", burst)})
	reg := prometheus.NewRegistry()
	log, _ := observed(zapcore.InfoLevel)
	h := host.New(cfg, host.Options{Logger: log, Metrics: metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})})
	h.Start()
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 2 { // two sessions: two more children
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx := host.WithSession(ctx, "session-"+strconv.Itoa(i))
			if _, jerr := catalog.NewView(h, nil, true).List(sctx, catalog.Tools, nil); jerr != nil {
				t.Errorf("list: %v", jerr)
			}
		}()
	}
	wg.Wait()
	count := func(outcome string) float64 {
		return value(t, reg, "mcpgw_upstream_stderr_lines_total", "upstream", "demo", "outcome", outcome)
	}
	waitFor(t, 20*time.Second, "three children's flood lines", func() bool { return count("logged")+count("dropped") == 3*lines })
	if got := count("logged"); got != burst {
		t.Errorf("three children logged %v lines, want the upstream's burst %d", got, burst)
	}
}
