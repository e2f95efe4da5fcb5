package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// floodChild: "flood" floods once initialized; "callflood" waits for a
// tools/call first, so that its requests belong to that call.
func floodChild(mode string) {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	line, _ := in.ReadString('\n')
	var init struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal([]byte(line), &init)
	fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"flood","version":"0"}}}`+"\n", init.ID)
	_ = out.Flush()
	if mode == "callflood" {
		for {
			l, err := in.ReadString('\n')
			if err != nil || strings.Contains(l, `"tools/call"`) {
				break
			}
		}
	}
	// From here on stdin is never read: every answer the gateway writes
	// stays in the pipe until it is full.
	for i := range 100 { // their refusals fit in the pipe (64 KiB)
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":"s%d","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`+"\n", i)
	}
	for i := range 20000 {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":"p%d","method":"ping"}`+"\n", i)
	}
	_ = out.Flush()
	select {} // killed by the client's Close
}

func floodClient(t *testing.T, mode string, opts client.Options) *client.Client {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tr := client.NewStdio(client.StdioConfig{Argv: []string{exe}, Env: map[string]string{"MCPGW_CLIENT_TEST_CHILD": mode}, StopGrace: 200 * time.Millisecond})
	opts.Name, opts.Protocol = "flood", "legacy"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) { // a poll, bounded by deadline
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestServerRequestsBoundedPerConnection (issue 37.7): a stdio child that
// sends 100 sampling requests and 20,000 pings and never reads its stdin.
// At most max_server_requests (8 here) are answered at once, the rest
// are refused at once with -32004 and counted; ping is answered inline.
// Before the fix every request got a goroutine of its own, all blocked
// writing to the full pipe: thousands of goroutines.
func TestServerRequestsBoundedPerConnection(t *testing.T) {
	baseline := runtime.NumGoroutine()
	var handling, refused atomic.Int64
	var refusedBound sync.Map
	release := make(chan struct{})
	c := floodClient(t, "flood", client.Options{
		MaxServerRequests:     8,
		ServerRequestsSetting: "upstreams.flood.max_server_requests",
		OnRefused: func(bound string) {
			refused.Add(1)
			refusedBound.Store(bound, true)
		},
		OnRequest: func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			handling.Add(1)
			select { // a person who never answers
			case <-release:
			case <-ctx.Done():
			}
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "no")
		},
	})
	peak := 0
	waitFor(t, "the flood to be refused or to pile up", func() bool {
		n := runtime.NumGoroutine()
		peak = max(peak, n)
		return refused.Load() >= 92 || n > baseline+500
	})
	// The admitted ones run on goroutines of their own: wait for them to
	// start (a loaded machine may not have run them yet), then none more.
	waitFor(t, "the admitted requests to be handled", func() bool { return handling.Load() >= 8 })
	t.Logf("goroutines: %d before, peak %d; %d handled, %d refused", baseline, peak, handling.Load(), refused.Load())
	if peak > baseline+60 {
		t.Errorf("goroutines grew by %d under a request flood (want ≤ 60 with max_server_requests 8)", peak-baseline)
	}
	if h := handling.Load(); h != 8 {
		t.Errorf("%d requests handled at once, want 8 (max_server_requests)", h)
	}
	if _, ok := refusedBound.Load("upstreams.flood.max_server_requests"); !ok || refused.Load() != 92 {
		t.Errorf("refused %d (bounds %v), want 92 naming upstreams.flood.max_server_requests", refused.Load(), keys(&refusedBound))
	}
	close(release)
	_ = c.Close()
}

// TestServerRequestsBoundedPerCall (issue 37.7): the requests that belong
// to one call are bounded by max_server_requests_per_call, below the
// connection's bound.
func TestServerRequestsBoundedPerCall(t *testing.T) {
	var handling, refused atomic.Int64
	var refusedBound sync.Map
	c := floodClient(t, "callflood", client.Options{
		MaxServerRequestsPerCall:     4,
		ServerRequestsPerCallSetting: "upstreams.flood.max_server_requests_per_call",
		OnRefused: func(bound string) {
			refused.Add(1)
			refusedBound.Store(bound, true)
		},
	})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Call(ctx, "tools/call", json.RawMessage(`{"name":"x"}`), client.CallOptions{
			Request: func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
				handling.Add(1)
				<-ctx.Done()
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "gone")
			},
		})
	}()
	waitFor(t, "the call's requests to be refused", func() bool { return refused.Load() >= 96 })
	// The admitted ones run on goroutines of their own: wait for them to
	// start (a loaded machine may not have run them yet), then none more.
	waitFor(t, "the admitted requests to be handled", func() bool { return handling.Load() >= 4 })
	if h := handling.Load(); h != 4 {
		t.Errorf("%d requests of the call handled at once, want 4 (max_server_requests_per_call)", h)
	}
	if _, ok := refusedBound.Load("upstreams.flood.max_server_requests_per_call"); !ok {
		t.Errorf("refusals named %v, want upstreams.flood.max_server_requests_per_call", keys(&refusedBound))
	}
	cancel()
	_ = c.Close()
	<-done
}

func keys(m *sync.Map) []any {
	var out []any
	m.Range(func(k, _ any) bool { out = append(out, k); return true })
	return out
}
