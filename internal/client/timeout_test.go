package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// scripted is a Transport whose upstream answers the methods in answers
// (method -> "result" or "error" member JSON) and ignores everything else.
type scripted struct {
	answers map[string]string

	mu      sync.Mutex
	methods []string // requests sent, in order
	deliver client.DeliverFunc
	done    chan struct{}
}

func newScripted(answers map[string]string) *scripted {
	return &scripted{answers: answers, done: make(chan struct{})}
}

func (s *scripted) Start(_ context.Context, deliver client.DeliverFunc) error {
	s.deliver = deliver
	return nil
}

func (s *scripted) Send(_ context.Context, msg []byte) error {
	m, err := jsonrpc.Parse(msg)
	if err != nil {
		return err
	}
	if m.Kind() != jsonrpc.KindRequest {
		return nil
	}
	s.mu.Lock()
	s.methods = append(s.methods, m.Method)
	s.mu.Unlock()
	if a, ok := s.answers[m.Method]; ok {
		reply := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,%s}`, m.ID, a)
		go s.deliver([]byte(reply), nil)
	}
	return nil
}

func (s *scripted) Done() <-chan struct{} { return s.done }
func (s *scripted) Err() error            { return nil }
func (s *scripted) Close() error {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	return nil
}

func (s *scripted) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.methods)
}

const initOK = `"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`

// A call that runs out of time names the bound that fired: the startup
// bound during the handshake even though the per-request timeout is
// longer, the per-request timeout (by its config key) when it is the
// shorter, and neither for a deadline of the caller's.
func TestTimeoutErrorNamesTheBound(t *testing.T) {
	tests := []struct {
		name    string
		answers map[string]string
		startup time.Duration // bound around Connect (0: none)
		timeout time.Duration // Options.Timeout
		caller  time.Duration // caller's own deadline on the call (0: none)
		want    string
	}{
		{"handshake: startup_timeout", nil, 50 * time.Millisecond, time.Minute, 0,
			"no answer to initialize within upstreams.up.startup_timeout (50ms)"},
		{"call: timeout", map[string]string{mcp.MethodInitialize: initOK}, 0, 50 * time.Millisecond, 0,
			"no answer to tools/call within upstreams.up.timeout (50ms)"},
		{"call: the caller's deadline", map[string]string{mcp.MethodInitialize: initOK}, 0, time.Minute, 50 * time.Millisecond,
			"no answer to tools/call before the deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.startup > 0 {
				var cancel context.CancelFunc
				ctx, cancel = client.WithBound(ctx, tc.startup, "upstreams.up.startup_timeout")
				defer cancel()
			}
			c, err := client.Connect(ctx, newScripted(tc.answers), client.Options{
				Name: "up", Protocol: "legacy", Timeout: tc.timeout, TimeoutSetting: "upstreams.up.timeout",
			})
			if err == nil {
				defer c.Close()
				cctx := context.Background()
				if tc.caller > 0 {
					var cancel context.CancelFunc
					cctx, cancel = context.WithTimeout(cctx, tc.caller)
					defer cancel()
				}
				_, err = c.Call(cctx, mcp.MethodToolsCall, json.RawMessage(`{"name":"x"}`), client.CallOptions{})
			}
			var te *client.TimeoutError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a TimeoutError saying %q", err, tc.want)
			}
		})
	}
}

// With PreferInitialize (an upstream known to have initialized before),
// the handshake initializes without probing; only an initialize that is
// refused leads to the server/discover probe.
func TestPreferInitializeSkipsTheProbe(t *testing.T) {
	discoverOK := `"result":{"supportedVersions":["` + string(mcp.Version20260728) + `"],"capabilities":{}}`
	tests := []struct {
		name       string
		prefer     bool
		answers    map[string]string
		wantSent   []string
		wantModern bool
	}{
		{"prefer, initializes", true, map[string]string{mcp.MethodInitialize: initOK, mcp.MethodServerDiscover: `"error":{"code":-32602,"message":"Invalid request parameters"}`},
			[]string{mcp.MethodInitialize}, false},
		{"prefer, initialize refused", true, map[string]string{mcp.MethodInitialize: `"error":{"code":-32601,"message":"Method not found"}`, mcp.MethodServerDiscover: discoverOK},
			[]string{mcp.MethodInitialize, mcp.MethodServerDiscover}, true},
		{"no knowledge, probes first", false, map[string]string{mcp.MethodInitialize: initOK, mcp.MethodServerDiscover: `"error":{"code":-32602,"message":"Invalid request parameters"}`},
			[]string{mcp.MethodServerDiscover, mcp.MethodInitialize}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			tr := newScripted(tc.answers)
			c, err := client.Connect(ctx, tr, client.Options{Name: "up", Protocol: "auto", PreferInitialize: tc.prefer})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sent := slices.DeleteFunc(tr.sent(), func(m string) bool { return m == mcp.MethodSubscriptionsListen })
			if !slices.Equal(sent, tc.wantSent) || c.Modern() != tc.wantModern {
				t.Errorf("sent %v (modern %v), want %v (modern %v)", sent, c.Modern(), tc.wantSent, tc.wantModern)
			}
		})
	}
}
