package gateway_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// (a) A reload that adds an upstream: its tools appear, the session is told
// with tools/list_changed, and the unchanged upstream is the same object on
// the same upstream connection (no reconnect).
func TestReloadAddsUpstream(t *testing.T) {
	t.Parallel()
	alphaURL, alphaSrv := gatewaytest.SDKUpstream(t, "alpha")
	betaURL, _ := gatewaytest.SDKUpstream(t, "beta")
	gw, base, reg := gatewaytest.StartReloadable(t, fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n", alphaURL))
	cs, changed := gatewaytest.ListChanges(t, base+"/mcp")
	if names := gatewaytest.SDKToolNames(t, cs); slices.Contains(names, "beta__echo") || !slices.Contains(names, "alpha__echo") {
		t.Fatalf("tools before: %v", names)
	}
	before := gw.Host().Upstream("alpha")
	sessionsBefore := gatewaytest.ServerSessions(alphaSrv)
	gatewaytest.DrainSignals(changed)

	if err := gw.Reload(gatewaytest.ParseConfig(t, fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n  beta: {url: %q}\n", alphaURL, betaURL))); err != nil {
		t.Fatalf("reload: %v", err)
	}
	gatewaytest.WaitSignal(t, changed, "tools/list_changed after the reload")
	names := gatewaytest.SDKToolNames(t, cs)
	if !slices.Contains(names, "beta__echo") || !slices.Contains(names, "alpha__echo") {
		t.Fatalf("tools after: %v", names)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := gatewaytest.CallText(ctx, cs, "beta__echo", map[string]any{"text": "hi"}); err != nil || got != "beta:hi" {
		t.Fatalf("beta__echo = %q, %v", got, err)
	}
	if got, err := gatewaytest.CallText(ctx, cs, "alpha__echo", map[string]any{"text": "hi"}); err != nil || got != "alpha:hi" {
		t.Fatalf("alpha__echo = %q, %v", got, err)
	}
	if gw.Host().Upstream("alpha") != before {
		t.Error("the unchanged upstream was replaced")
	}
	if n := gatewaytest.ServerSessions(alphaSrv); n != sessionsBefore {
		t.Errorf("alpha's server sessions %d -> %d: the unchanged upstream reconnected", sessionsBefore, n)
	}
	if got := gatewaytest.Reloads(t, reg, "success"); got != 1 {
		t.Errorf("reload successes = %v, want 1", got)
	}
}

// (b) A reload that removes an upstream while a slow call to it is in
// flight: the call completes, then the upstream stops, and calls to its
// tools are unknown.
func TestReloadRemovesUpstreamAfterInFlightCall(t *testing.T) {
	t.Parallel()
	alphaURL, _ := gatewaytest.SDKUpstream(t, "alpha")
	betaURL, betaSrv := gatewaytest.SDKUpstream(t, "beta")
	// The call is in flight until the test lets it go, however long the
	// reload and the checks after it take on a loaded machine.
	release := make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let) // a test that fails lets its held call go, before beta's server closes
	mcp.AddTool(betaSrv, &mcp.Tool{Name: "held"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-release:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	gw, base, _ := gatewaytest.StartReloadable(t, fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n  beta: {url: %q}\n", alphaURL, betaURL))
	cs := gatewaytest.Connect(t, base+"/mcp", nil, "")
	beta := gw.Host().Upstream("beta")

	type result struct {
		text string
		err  error
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		text, err := gatewaytest.CallText(ctx, cs, "beta__held", nil)
		done <- result{text, err, time.Now()}
	}()
	testwait.Until(t, "the held call to be in flight", func() bool { return beta.InFlight() != 0 })
	if err := gw.Reload(gatewaytest.ParseConfig(t, fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n", alphaURL))); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if gw.Host().Upstream("beta") != nil || !beta.Retired() {
		t.Fatal("beta is still in the upstream set")
	}
	select {
	case <-beta.Stopped():
		t.Fatal("beta stopped while its call was in flight")
	default:
	}
	let()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second): // a bound on the event, far above its time
		t.Fatal("the in-flight call never completed")
	}
	if r.err != nil || r.text != "done" {
		t.Fatalf("in-flight call: %q, %v; want its result", r.text, r.err)
	}
	select {
	case <-beta.Stopped():
	case <-time.After(10 * time.Second): // a bound on the event, far above its time
		t.Fatal("beta never stopped after its call completed")
	}
	stoppedAt := time.Now()
	if s, _ := beta.State(); s != host.StateStopped {
		t.Errorf("beta state = %s, want stopped", s)
	}
	t.Logf("call answered, beta stopped %s later", stoppedAt.Sub(r.at).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := gatewaytest.CallText(ctx, cs, "beta__echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("call to a removed upstream: %v, want unknown tool", err)
	}
	if got, err := gatewaytest.CallText(ctx, cs, "alpha__echo", map[string]any{"text": "x"}); err != nil || got != "alpha:x" {
		t.Errorf("alpha__echo after the reload = %q, %v", got, err)
	}
}

// (c) A reload that cannot be built changes nothing: the error is returned,
// counted, and tools, policy and upstreams stay as they were.
func TestReloadInvalidChangesNothing(t *testing.T) {
	t.Parallel()
	alphaURL, _ := gatewaytest.SDKUpstream(t, "alpha")
	betaURL, _ := gatewaytest.SDKUpstream(t, "beta")
	good := fmt.Sprintf("upstreams:\n  alpha: {url: %q}\npolicy:\n  default: allow\n  rules:\n    - deny: [alpha__t00]\n", alphaURL)
	gw, base, reg := gatewaytest.StartReloadable(t, good)
	cs := gatewaytest.Connect(t, base+"/mcp", nil, "")
	tools := gatewaytest.SDKToolNames(t, cs)
	alpha := gw.Host().Upstream("alpha")
	missing := filepath.Join(t.TempDir(), "missing")

	for name, yaml := range map[string]string{
		"pinning lock missing in enforce mode": fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n  beta: {url: %q}\npolicy:\n  default: allow\n  pinning: {mode: enforce, lock_file: %q}\n", alphaURL, betaURL, missing),
		"api key file missing":                 fmt.Sprintf("upstreams:\n  beta: {url: %q}\nauth:\n  api_keys: [{name: ci, key_file: %q}]\n", betaURL, missing),
		"listen changed":                       fmt.Sprintf("listen: 127.0.0.1:1\nupstreams:\n  beta: {url: %q}\n", betaURL),
	} {
		err := gw.Reload(gatewaytest.ParseConfig(t, yaml))
		if err == nil {
			t.Fatalf("%s: reload succeeded", name)
		}
		t.Logf("%s: %v", name, err)
		if name == "listen changed" && (!strings.Contains(err.Error(), "listen") || !strings.Contains(err.Error(), "restart")) {
			t.Errorf("%s: error %q does not name the key and the restart", name, err)
		}
	}
	if got := gatewaytest.Reloads(t, reg, "failure"); got != 3 {
		t.Errorf("reload failures = %v, want 3", got)
	}
	if got := gatewaytest.Reloads(t, reg, "success"); got != 0 {
		t.Errorf("reload successes = %v, want 0", got)
	}
	if names := gw.Host().Names(); !slices.Equal(names, []string{"alpha"}) || gw.Host().Upstream("alpha") != alpha {
		t.Errorf("upstreams changed: %v", names)
	}
	if after := gatewaytest.SDKToolNames(t, cs); !slices.Equal(after, tools) {
		t.Errorf("tools changed: %v -> %v", tools, after)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := gatewaytest.CallText(ctx, cs, "alpha__t00", nil); err == nil {
		t.Error("the old policy's deny no longer holds")
	}
	if got, err := gatewaytest.CallText(ctx, cs, "alpha__echo", map[string]any{"text": "x"}); err != nil || got != "alpha:x" {
		t.Errorf("alpha__echo = %q, %v", got, err)
	}
}

// (d) A policy change applies to the next call of an existing session,
// which is told its lists changed, without reconnecting.
func TestReloadPolicyNextCall(t *testing.T) {
	t.Parallel()
	alphaURL, _ := gatewaytest.SDKUpstream(t, "alpha")
	gw, base, _ := gatewaytest.StartReloadable(t, fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n", alphaURL))
	cs, changed := gatewaytest.ListChanges(t, base+"/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := gatewaytest.CallText(ctx, cs, "alpha__echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	gatewaytest.DrainSignals(changed)
	deny := fmt.Sprintf("upstreams:\n  alpha: {url: %q}\npolicy:\n  default: allow\n  rules:\n    - deny: [alpha__echo]\n", alphaURL)
	if err := gw.Reload(gatewaytest.ParseConfig(t, deny)); err != nil {
		t.Fatal(err)
	}
	if _, err := gatewaytest.CallText(ctx, cs, "alpha__echo", map[string]any{"text": "x"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("denied call: %v, want unknown tool", err)
	}
	gatewaytest.WaitSignal(t, changed, "tools/list_changed after the policy change")
	if names := gatewaytest.SDKToolNames(t, cs); slices.Contains(names, "alpha__echo") || !slices.Contains(names, "alpha__t00") {
		t.Errorf("tools after the deny: %v", names)
	}
	if got, err := gatewaytest.CallText(ctx, cs, "alpha__t00", nil); err != nil || got != "alpha/t00" {
		t.Errorf("alpha__t00 = %q, %v", got, err)
	}
	// And back.
	if err := gw.Reload(gatewaytest.ParseConfig(t, fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n", alphaURL))); err != nil {
		t.Fatal(err)
	}
	if got, err := gatewaytest.CallText(ctx, cs, "alpha__echo", map[string]any{"text": "y"}); err != nil || got != "alpha:y" {
		t.Errorf("alpha__echo after allowing it again = %q, %v", got, err)
	}
}

// (e) Reload under load: calls to an unchanged, still-allowed tool go on
// while the upstream set and the policy change 20 times (a broken config
// among them); not one fails.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	alphaURL, _ := gatewaytest.SDKUpstream(t, "alpha")
	betaURL, _ := gatewaytest.SDKUpstream(t, "beta")
	gammaURL, _ := gatewaytest.SDKUpstream(t, "gamma")
	configA := fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n  beta: {url: %q, timeout: 30s}\n", alphaURL, betaURL)
	configB := fmt.Sprintf("upstreams:\n  alpha: {url: %q}\n  beta: {url: %q, timeout: 20s}\n  gamma: {url: %q}\npolicy:\n  default: allow\n  rules:\n    - deny: [\"gamma__*\", beta__t01]\n", alphaURL, betaURL, gammaURL)
	broken := fmt.Sprintf("upstreams:\n  alpha: {url: %q}\npolicy:\n  default: allow\n  pinning: {mode: enforce, lock_file: %q}\n", alphaURL, filepath.Join(t.TempDir(), "missing"))
	gw, base, reg := gatewaytest.StartReloadable(t, configA)
	alpha := gw.Host().Upstream("alpha")
	// Its connection, not its server's session count: the count also sees
	// sessions the SDK server keeps from the startup probe, which come and
	// go on their own (a flake under load).
	alphaConn := alpha.SharedClient()

	const workers, calls = 4, 300
	sessions := []*mcp.ClientSession{gatewaytest.Connect(t, base+"/mcp", nil, ""), gatewaytest.Connect(t, base+"/mcp", nil, "")}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := sessions[w%len(sessions)]
			<-start
			for i := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				text := fmt.Sprintf("w%d-%d", w, i)
				got, err := gatewaytest.CallText(ctx, cs, "alpha__echo", map[string]any{"text": text})
				cancel()
				if err == nil && got != "alpha:"+text {
					err = fmt.Errorf("got %q", got)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				ok.Add(1)
			}
		}()
	}
	close(start)
	began := time.Now()
	var reloadErrs []error
	for i := range 20 {
		yaml := configA
		switch {
		case i == 10:
			yaml = broken
		case i%2 == 0:
			yaml = configB
		}
		if err := gw.Reload(gatewaytest.ParseConfig(t, yaml)); err != nil {
			reloadErrs = append(reloadErrs, err)
		}
		time.Sleep(40 * time.Millisecond) // the behaviour under test: reloads spaced while calls run
	}
	reloadTime := time.Since(began)
	callsDuringReloads := ok.Load() + failed.Load()
	wg.Wait()
	elapsed := time.Since(began)

	if failed.Load() != 0 {
		t.Errorf("%d of %d calls to the unchanged tool failed; first: %v", failed.Load(), workers*calls, firstErr.Load())
	}
	if len(reloadErrs) != 1 {
		t.Errorf("reload errors: %v, want exactly the broken config's", reloadErrs)
	}
	if s, f := gatewaytest.Reloads(t, reg, "success"), gatewaytest.Reloads(t, reg, "failure"); s != 19 || f != 1 {
		t.Errorf("reloads: %v successes, %v failures; want 19 and 1", s, f)
	}
	if gw.Host().Upstream("alpha") != alpha || alpha.SharedClient() != alphaConn {
		t.Error("the unchanged upstream was replaced or reconnected")
	}
	// The last config applied is configA (i=19): beta serves, gamma is gone.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := gatewaytest.CallText(ctx, sessions[0], "beta__t01", nil); err != nil || got != "beta/t01" {
		t.Errorf("beta__t01 after the last reload = %q, %v", got, err)
	}
	if _, err := gatewaytest.CallText(ctx, sessions[0], "gamma__echo", map[string]any{"text": "x"}); err == nil {
		t.Error("gamma__echo still answers after the last reload removed gamma")
	}
	t.Logf("%d calls ok, %d failed, in %s; 20 reloads in %s with %d calls during them",
		ok.Load(), failed.Load(), elapsed.Round(time.Millisecond), reloadTime.Round(time.Millisecond), callsDuringReloads)
}
