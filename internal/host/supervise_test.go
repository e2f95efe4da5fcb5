package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/demo"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/sandbox"
	"github.com/mcpgw/mcpgw/internal/telemetry"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// The test binary doubles as the stdio children these tests supervise,
// chosen by MCPGW_HOST_TEST_CHILD:
//
//	demo      the demo MCP server (tools echo, add, sleep)
//	exit      exits at once with status 3 (a crash loop)
//	stubborn  starts a grandchild, serves the demo server, then ignores
//	          both stdin EOF and SIGTERM (only SIGKILL stops it)
//	sleep     sleeps (the stubborn child's grandchild; a hung upstream)
//	late      serves the demo server once the file MCPGW_HOST_TEST_RELEASE exists
//	flood     floods stderr, then serves the demo server (startup_test.go)
//	pyprobe   a legacy server that answers server/discover as Python-SDK
//	          1.x servers do (startup_test.go)
func TestMain(m *testing.M) {
	sandbox.LauncherMain() // sandbox_test.go: the binary is also the launcher
	switch os.Getenv("MCPGW_HOST_TEST_CHILD") {
	case "":
		// gatewaytest.Main also serves the stdio upstreams of the tests
		// that run a whole gateway, then runs the tests.
		gatewaytest.Main(m)
	case "late":
		// A child process polls for its release file (no channel crosses
		// processes); the test bounds the wait.
		for release := os.Getenv("MCPGW_HOST_TEST_RELEASE"); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(release); err == nil {
				break
			}
		}
		_ = demo.ServeStdio(context.Background(), "test")
		os.Exit(0)
	case "flood":
		floodStderr()
		_ = demo.ServeStdio(context.Background(), "test")
		os.Exit(0)
	case "pyprobe":
		servePyProbe()
		os.Exit(0)
	case "demo":
		_ = demo.ServeStdio(context.Background(), "test")
		os.Exit(0)
	case "exit":
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		os.Exit(3)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		exe, _ := os.Executable()
		gc := exec.Command(exe)
		gc.Env = append(os.Environ(), "MCPGW_HOST_TEST_CHILD=sleep")
		if err := gc.Start(); err != nil {
			os.Exit(4)
		}
		_ = os.WriteFile(os.Getenv("MCPGW_HOST_TEST_PIDFILE"), []byte(strconv.Itoa(gc.Process.Pid)), 0o600)
		_ = demo.ServeStdio(context.Background(), "test")
		time.Sleep(time.Hour) // a child that outlives its stdin: the behaviour under test; the test kills it
	case "sleep":
		time.Sleep(time.Hour) // a child that never answers: the behaviour under test; the test kills it
	}
	os.Exit(5)
}

func childConfig(t *testing.T, mode string, extraEnv map[string]string) *config.Config {
	return childConfigProtocol(t, mode, "auto", extraEnv)
}

func childConfigProtocol(t *testing.T, mode, protocol string, extraEnv map[string]string) *config.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MCPGW_HOST_TEST_CHILD": mode}
	for k, v := range extraEnv {
		env[k] = v
	}
	envJSON, _ := json.Marshal(env)
	yaml := fmt.Sprintf("upstreams:\n  demo:\n    command: [%q]\n    protocol: %s\n    env: %s\n", exe, protocol, envJSON)
	cfg, err := config.Parse("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// procState returns the state letter (R, S, Z, ...) and parent of pid, or
// ok=false when there is no such process.
func procState(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // comm may hold spaces and parentheses
	if i < 0 || i+4 > len(s) {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// zombieChildren lists this process's children in state Z (exited, not reaped).
func zombieChildren(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ppid, ok := procState(pid); ok && ppid == os.Getpid() && st == 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	st, _, ok := procState(pid)
	return ok && st != 'Z' && st != 'X'
}

// waitFor polls cond for d, or testwait.Long if that is longer: the bound
// only decides how long a broken test takes to say so, and a short one
// fails a right test on a loaded machine.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(max(d, testwait.Long))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", max(d, testwait.Long), what)
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
}

func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func call(ctx context.Context, h *host.Host, tool string, args string) (*jsonrpc.Message, *jsonrpc.Error) {
	params := json.RawMessage(fmt.Sprintf(`{"name":"demo__%s","arguments":%s}`, tool, args))
	return catalog.NewView(h, nil, true).Forward(ctx, mcp.MethodToolsCall, params, client.CallOptions{})
}

// reqID is a downstream request's id, as the edge puts it in the context.
type reqID string

func (r reqID) RequestID() string { return string(r) }

// teeLogger logs to the test's log and to an observer the test reads.
func teeLogger(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)), logs
}

// failureDetail is the error logged for the failed request id: the detail
// its caller was not told ("" when nothing was logged for it).
func failureDetail(logs *observer.ObservedLogs, id string) string {
	for _, e := range logs.FilterField(zap.String("request_id", id)).All() {
		if s, ok := e.ContextMap()["error"].(string); ok {
			return s
		}
	}
	return ""
}

// A stdio child killed with SIGKILL in the middle of a call: the call fails
// within a second, the child is restarted, and nothing is left a zombie.
//
// With protocol legacy the upstream has one child, which carries the call.
// With auto the demo server speaks 2026-07-28, so a legacy caller's call
// goes over a second, initialized connection (its own child); killing the
// primary child takes that one down too, and its call must fail as fast.
func TestKillChildMidCall(t *testing.T) {
	for _, protocol := range []string{"legacy", "auto"} {
		t.Run(protocol, func(t *testing.T) { testKillChildMidCall(t, protocol) })
	}
}

func testKillChildMidCall(t *testing.T, protocol string) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})
	log, logs := teeLogger(t)
	h := host.New(childConfigProtocol(t, "demo", protocol, nil), host.Options{
		Logger: log, Metrics: m,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	h.Start()
	defer h.Close()
	// One context spans the whole test: the start, the call, the restart
	// (each a wait of up to testwait.Long) and the call after it. Under
	// load, 30s for all of them together was once not enough (1 of 5 runs
	// of TestKillChildMidCall/auto, whose every start first probes
	// server/discover).
	ctx, cancel := context.WithTimeout(context.Background(), 4*testwait.Long)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	u := h.Upstream("demo")
	if s, err := u.State(); s != host.StateReady {
		t.Fatalf("state %s (%v), want ready", s, err)
	}
	pid := u.PID()
	if pid == 0 || !alive(pid) {
		t.Fatalf("no live child (pid %d)", pid)
	}

	type result struct {
		resp *jsonrpc.Message
		err  *jsonrpc.Error
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		resp, err := call(telemetry.WithRequestRef(ctx, reqID("kill-1")), h, "sleep", `{"ms":20000}`)
		done <- result{resp, err, time.Now()}
	}()
	waitFor(t, 5*time.Second, "the call to be in flight", func() bool {
		return value(t, reg, "mcpgw_upstream_inflight_calls", "upstream", "demo") == 1
	})
	// Well inside the child's 20s sleep; a kill before the child got
	// there still ends the call, so load cannot make this fail.
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second): // half the child's 20s sleep: the kill, not the sleep's end, failed the call
		t.Fatal("the call did not fail within 10s of the child's SIGKILL")
	}
	if r.err == nil {
		t.Fatalf("the call succeeded (%s) although its child was killed", r.resp.Result)
	}
	// The caller is told the request failed, and its id; the log says why.
	if r.err.Code != mcp.CodeUpstreamUnavailable || !strings.Contains(r.err.Message, "request id kill-1") {
		t.Errorf("error = %d %q, want %d naming the request id", r.err.Code, r.err.Message, mcp.CodeUpstreamUnavailable)
	}
	if d := failureDetail(logs, "kill-1"); protocol == "legacy" && !strings.Contains(d, "killed by signal 9") {
		t.Errorf("logged detail %q, want it naming the kill", d)
	}
	t.Logf("call failed %s after SIGKILL: %s", r.at.Sub(killed).Round(time.Millisecond), r.err.Message)

	waitFor(t, 10*time.Second, "the child to be restarted", func() bool {
		s, _ := u.State()
		return s == host.StateReady && u.PID() != 0 && u.PID() != pid
	})
	t.Logf("child back %s after SIGKILL (pid %d -> %d)", time.Since(killed).Round(time.Millisecond), pid, u.PID())
	if resp, err := call(ctx, h, "add", `{"a":2,"b":3}`); err != nil || resp.Error != nil {
		t.Fatalf("call after the restart: %v %v", err, resp)
	}
	if z := zombieChildren(t); len(z) > 0 {
		t.Errorf("zombie children: %v", z)
	}
	if _, _, ok := procState(pid); ok {
		t.Errorf("the killed child %d is still in the process table", pid)
	}
	for name, want := range map[string]float64{
		"mcpgw_upstream_restarts_total":           1,
		"mcpgw_upstream_handshake_failures_total": 0,
		"mcpgw_upstream_up":                       1,
		"mcpgw_upstream_inflight_calls":           0,
	} {
		if got := value(t, reg, name, "upstream", "demo"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := value(t, reg, "mcpgw_upstream_call_errors_total", "upstream", "demo", "reason", "transport"); got != 1 {
		t.Errorf("call errors (transport) = %v, want 1", got)
	}
}

// A child that exits at once, every time: the breaker opens after
// BreakerThreshold failures, calls fail fast saying so, the metrics show
// it, and after the cooldown one probe that fails reopens it.
func TestCrashLoopOpensBreaker(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})
	log, logs := teeLogger(t)
	h := host.New(childConfig(t, "exit", nil), host.Options{
		Logger: log, Metrics: m,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		BreakerThreshold: 3, BreakerWindow: 30 * time.Second, BreakerCooldown: 1500 * time.Millisecond,
	})
	h.Start()
	defer h.Close()
	u := h.Upstream("demo")
	start := time.Now()
	waitFor(t, 10*time.Second, "the breaker to open", func() bool {
		s, _ := u.State()
		return s == host.StateBreakerOpen
	})
	t.Logf("breaker open %s after start", time.Since(start).Round(time.Millisecond))
	if at := u.RetryAt(); at.IsZero() || time.Until(at) > 1500*time.Millisecond {
		t.Errorf("RetryAt = %v, want within the 1.5s cooldown", at)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcpgw_upstream_breaker_open 1 while the upstream's crash-loop breaker is open (failing repeatedly; retried slowly), else 0.
# TYPE mcpgw_upstream_breaker_open gauge
mcpgw_upstream_breaker_open{upstream="demo"} 1
# HELP mcpgw_upstream_breaker_opens_total Times the upstream's crash-loop breaker opened.
# TYPE mcpgw_upstream_breaker_opens_total counter
mcpgw_upstream_breaker_opens_total{upstream="demo"} 1
# HELP mcpgw_upstream_handshake_failures_total Connection attempts that failed: the child did not start, the server did not answer, or the handshake failed.
# TYPE mcpgw_upstream_handshake_failures_total counter
mcpgw_upstream_handshake_failures_total{upstream="demo"} 3
# HELP mcpgw_upstream_restarts_total Reconnection attempts after the upstream failed or was lost (for a stdio upstream: child processes respawned).
# TYPE mcpgw_upstream_restarts_total counter
mcpgw_upstream_restarts_total{upstream="demo"} 2
# HELP mcpgw_upstream_up Whether the upstream is connected and ready (1) or not (0).
# TYPE mcpgw_upstream_up gauge
mcpgw_upstream_up{upstream="demo"} 0
`), "mcpgw_upstream_breaker_open", "mcpgw_upstream_breaker_opens_total", "mcpgw_upstream_handshake_failures_total",
		"mcpgw_upstream_restarts_total", "mcpgw_upstream_up"); err != nil {
		t.Error(err)
	}
	if got := value(t, reg, "mcpgw_upstream_state", "upstream", "demo", "state", "breaker_open"); got != 1 {
		t.Errorf(`mcpgw_upstream_state{state="breaker_open"} = %v, want 1`, got)
	}

	// Calls fail fast, naming the crash loop; the child's last words are
	// the operator's, in the log under the request's id.
	t0 := time.Now()
	_, jerr := call(telemetry.WithRequestRef(context.Background(), reqID("loop-1")), h, "echo", `{"text":"x"}`)
	if jerr == nil || jerr.Code != mcp.CodeUpstreamUnavailable {
		t.Fatalf("call while the breaker is open: %v, want an upstream-unavailable error", jerr)
	}
	if d := time.Since(t0); d > 200*time.Millisecond {
		t.Errorf("the call took %s to fail; want fast", d)
	}
	for _, want := range []string{"breaker_open", "crash loop", "request id loop-1"} {
		if !strings.Contains(jerr.Message, want) {
			t.Errorf("error %q does not mention %q", jerr.Message, want)
		}
	}
	if strings.Contains(jerr.Message, "crashing on purpose") {
		t.Errorf("error %q quotes the child's stderr", jerr.Message)
	}
	if d := failureDetail(logs, "loop-1"); !strings.Contains(d, "crashing on purpose") {
		t.Errorf("logged detail %q, want the child's last words", d)
	}
	if z := zombieChildren(t); len(z) > 0 {
		t.Errorf("zombie children: %v", z)
	}

	// After the cooldown a single probe fails and reopens the breaker.
	waitFor(t, 10*time.Second, "the half-open probe to reopen the breaker", func() bool {
		return value(t, reg, "mcpgw_upstream_breaker_opens_total", "upstream", "demo") == 2
	})
	if got := value(t, reg, "mcpgw_upstream_handshake_failures_total", "upstream", "demo"); got != 4 {
		t.Errorf("handshake failures after one probe = %v, want 4", got)
	}
	if z := zombieChildren(t); len(z) > 0 {
		t.Errorf("zombie children after %v restarts: %v", value(t, reg, "mcpgw_upstream_restarts_total", "upstream", "demo"), z)
	}
}

// Close stops a child that ignores stdin EOF and SIGTERM with SIGKILL, and
// its grandchild with it (the process group), leaving no zombie.
func TestCloseKillsProcessGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "grandchild.pid")
	h := host.New(childConfig(t, "stubborn", map[string]string{"MCPGW_HOST_TEST_PIDFILE": pidfile}), host.Options{Logger: zaptest.NewLogger(t)})
	h.Start()
	// One context spans the whole test: the start, the call, the restart
	// (each a wait of up to testwait.Long) and the call after it. Under
	// load, 30s for all of them together was once not enough (1 of 5 runs
	// of TestKillChildMidCall/auto, whose every start first probes
	// server/discover).
	ctx, cancel := context.WithTimeout(context.Background(), 4*testwait.Long)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	u := h.Upstream("demo")
	if s, err := u.State(); s != host.StateReady {
		h.Close()
		t.Fatalf("state %s (%v)", s, err)
	}
	child := u.PID()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(string(b))
	if !alive(child) || !alive(grandchild) {
		h.Close()
		t.Fatalf("child %d or grandchild %d not running", child, grandchild)
	}
	start := time.Now()
	h.Close()
	t.Logf("Close took %s (stdin closed, SIGTERM ignored, SIGKILL)", time.Since(start).Round(time.Millisecond))
	if alive(child) {
		t.Errorf("child %d survived Close", child)
	}
	waitFor(t, 2*time.Second, "the grandchild to die", func() bool { return !alive(grandchild) })
	if z := zombieChildren(t); len(z) > 0 {
		t.Errorf("zombie children: %v", z)
	}
	if s, _ := u.State(); s != host.StateStopped {
		t.Errorf("state after Close = %s, want stopped", s)
	}
	var ue *host.UnavailableError
	if _, err := u.Client(ctx); !errors.As(err, &ue) {
		t.Errorf("Client after Close: %v, want *UnavailableError", err)
	}
}
