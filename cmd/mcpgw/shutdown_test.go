package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as mcpgw: with MCPGW_TEST_AS_MCPGW=1 it runs the
// real command line (run, demo-server, ...) exactly as main does, so these
// tests drive the program as a separate process, signals included, without
// a second build. Run as "demo-server" it is mcpgw too: the demo upstream
// child of such a gateway does not get MCPGW_TEST_AS_MCPGW (a child gets a
// minimal environment, not the gateway's).
func TestMain(m *testing.M) {
	if os.Getenv("MCPGW_TEST_AS_MCPGW") == "1" || len(os.Args) > 1 && os.Args[1] == "demo-server" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// proc is a running mcpgw child with its JSON log lines.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs []map[string]any
	raw  []string
	exit chan error
}

func startMCPGW(t *testing.T, args ...string) *proc {
	t.Helper()
	return startMCPGWEnv(t, nil, args...)
}

// startMCPGWEnv is startMCPGW with env added to the process environment.
func startMCPGWEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(exe, args...), exit: make(chan error, 1)}
	p.cmd.Env = append(append(os.Environ(), "MCPGW_TEST_AS_MCPGW=1"), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var m map[string]any
			_ = json.Unmarshal([]byte(line), &m)
			p.mu.Lock()
			p.raw = append(p.raw, line)
			if m != nil {
				p.logs = append(p.logs, m)
			}
			p.mu.Unlock()
		}
		p.exit <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() || os.Getenv("MCPGW_TEST_SHOW_LOGS") != "" {
			p.mu.Lock()
			t.Logf("mcpgw log:\n%s", strings.Join(p.raw, "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// field waits for a log line with msg and returns its field key.
func (p *proc) field(t *testing.T, msg, key string) any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for _, m := range p.logs {
			if m["msg"] == msg && m[key] != nil {
				p.mu.Unlock()
				return m[key]
			}
		}
		p.mu.Unlock()
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	t.Fatalf("no %q log line with %s", msg, key)
	return nil
}

func post(url, session, body string) (*http.Response, []byte, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func status(url string) int {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}`

// SIGTERM with a slow call in flight: /readyz turns 503 first, new sessions
// are refused, the call completes, the demo child is stopped, exit 0.
func TestSIGTERMDrainsInFlightCall(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "mcpgw.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: "127.0.0.1:0"}
upstreams:
  demo:
    command: [%q, demo-server]
    protocol: legacy
    required: true
`, exe)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startMCPGW(t, "run", "-c", cfg, "--log-format", "json", "--drain-timeout", "20s")
	mcpURL := p.field(t, "serving MCP", "url").(string)
	admin := p.field(t, "serving admin endpoints", "url").(string)
	childPID := int(p.field(t, "started child process", "pid").(float64))

	deadline := time.Now().Add(30 * time.Second)
	for status(admin+"/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("/readyz never became 200")
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
	}

	resp, _, err := post(mcpURL, "", initialize)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %v %v", resp, err)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	_, _, _ = post(mcpURL, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	const sleepMS = 2000
	type result struct {
		body []byte
		err  error
		at   time.Time
	}
	callDone := make(chan result, 1)
	go func() {
		_, b, err := post(mcpURL, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo__sleep","arguments":{"ms":%d}}}`, sleepMS))
		callDone <- result{b, err, time.Now()}
	}()
	// Wait until the call is in flight at the upstream.
	for !strings.Contains(scrapeText(admin), `mcpgw_upstream_inflight_calls{upstream="demo"} 1`) {
		if time.Now().After(deadline) {
			t.Fatal("the call never got in flight")
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}

	sigAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var notReadyAt time.Time
	for notReadyAt.IsZero() && time.Since(sigAt) < 5*time.Second {
		if status(admin+"/readyz") == http.StatusServiceUnavailable {
			notReadyAt = time.Now()
		}
		time.Sleep(5 * time.Millisecond) // a poll, bounded by deadline
	}
	if notReadyAt.IsZero() {
		t.Fatal("/readyz never answered 503 after SIGTERM")
	}
	// New sessions are refused while the call drains (503, or the listener
	// is already closed).
	if resp, _, err := post(mcpURL, "", initialize); err == nil && resp.StatusCode == http.StatusOK {
		t.Error("a new session was accepted during the drain")
	}

	var r result
	select {
	case r = <-callDone:
	case <-time.After(20 * time.Second): // a bound on the event, far above its time
		t.Fatal("the in-flight call never completed")
	}
	if r.err != nil || !strings.Contains(string(r.body), "slept 2s") || strings.Contains(string(r.body), `"error"`) {
		t.Fatalf("in-flight call: %v %s, want its result", r.err, r.body)
	}
	if !notReadyAt.Before(r.at) {
		t.Errorf("/readyz turned 503 at +%s, after the call completed at +%s", notReadyAt.Sub(sigAt), r.at.Sub(sigAt))
	}

	var exitErr error
	select {
	case exitErr = <-p.exit:
	case <-time.After(20 * time.Second): // a bound on the event, far above its time
		t.Fatal("mcpgw did not exit after the drain")
	}
	exitedAt := time.Now()
	if exitErr != nil {
		var ee *exec.ExitError
		errors.As(exitErr, &ee)
		t.Fatalf("mcpgw exited with %v, want 0", exitErr)
	}
	t.Logf("SIGTERM -> /readyz 503 in %s; call answered at +%s; exit 0 at +%s",
		notReadyAt.Sub(sigAt).Round(time.Millisecond), r.at.Sub(sigAt).Round(time.Millisecond), exitedAt.Sub(sigAt).Round(time.Millisecond))
	// The demo child was stopped with the gateway (reaped by it: gone).
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", childPID)); err == nil {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", childPID))
		t.Errorf("the upstream child %d outlived mcpgw: %s", childPID, b)
	}
}

func scrapeText(admin string) string {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(admin + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A second signal during the drain exits at once.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "mcpgw.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  demo:\n    command: [%q, demo-server]\n", exe)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startMCPGW(t, "run", "-c", cfg, "--log-format", "json", "--shutdown-delay", "30s")
	p.field(t, "serving MCP", "url")
	p.field(t, "upstream ready", "protocol_version")
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.field(t, "not ready; serving on while load balancers notice", "shutdown_delay")
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.exit:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("exit = %v, want status 1", err)
		}
		t.Logf("exited %s after the second signal", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second): // "at once", generously: the shutdown delay it cuts short is 30s
		t.Fatal("a second signal did not exit at once")
	}
}
