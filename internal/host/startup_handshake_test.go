package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// A session keeps the capabilities and instructions of its initialize
// answer for its whole life, and hosts initialize at once (mcpgw stdio's
// within 100 ms of its start). So initialize waits for an upstream still
// making its first connection, as a list does (startup_list_wait), and
// answers with what it offers: completions and its instructions here. Over
// Streamable HTTP and over mcpgw stdio.
func TestInitializeWaitsForStartingUpstream(t *testing.T) {
	const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`
	t.Run("streamable", func(t *testing.T) {
		yaml, reached, gate := gatedUpstream(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.Start(gatewaytest.ParseConfig(t, yaml), gateway.Options{Logger: zaptest.NewLogger(t), Listener: ln})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = gw.Shutdown(ctx)
		})
		<-reached // the upstream is starting
		answered := make(chan json.RawMessage, 1)
		go func() {
			c := &gatewaytest.RawClient{T: t, URL: "http://" + ln.Addr().String() + "/mcp"}
			answered <- c.Post(initialize).Last(t).Result
		}()
		judgeHandshake(t, answered, gate)
	})
	t.Run("stdio", func(t *testing.T) {
		yaml, reached, gate := gatedUpstream(t)
		in, out, _ := gatewaytest.StdioGateway(t, yaml, "")
		<-reached
		answered := make(chan json.RawMessage, 1)
		go func() {
			s := &gatewaytest.StdioRaw{T: t, In: in, Out: bufio.NewReader(out)}
			s.Send(initialize)
			m, _ := s.Next()
			answered <- m.Result
		}()
		judgeHandshake(t, answered, gate)
	})
	// The Go SDK's client over mcpgw stdio, as a host launches it: in a
	// session revision (initialize), and by default (2026-07-28's
	// server/discover).
	for _, version := range []string{"2025-11-25", ""} {
		t.Run("stdio go-sdk "+version, func(t *testing.T) {
			yaml, reached, gate := gatedUpstream(t)
			in, out, _ := gatewaytest.StdioGateway(t, yaml, "")
			<-reached
			answered := make(chan json.RawMessage, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
				defer cancel()
				var opts *mcp.ClientSessionOptions
				if version != "" {
					opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
				}
				c := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil)
				cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(out), Writer: in}, opts)
				if err != nil {
					t.Error(err)
					answered <- nil
					return
				}
				b, _ := json.Marshal(cs.InitializeResult())
				answered <- b
			}()
			judgeHandshake(t, answered, gate)
		})
	}
}

// gatedUpstream is a config whose one upstream (an SDK server with
// instructions and completions) hangs its first connection until gate is
// closed; reached is closed when that connection arrives.
func gatedUpstream(t *testing.T) (yaml string, reached <-chan struct{}, gate chan struct{}) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, &mcp.ServerOptions{
		Instructions: "use the slow tools slowly",
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{}, nil
		},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "t"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	arrived, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	return fmt.Sprintf("upstreams:\n  slow: {url: %q, startup_list_wait: 60s, startup_timeout: 60s}\nroutes: [{path: /mcp}]\n", up.URL+"/mcp"), arrived, gate
}

// judgeHandshake lets the upstream through and checks the initialize
// answer offers what it offers.
func judgeHandshake(t *testing.T, answered <-chan json.RawMessage, gate chan struct{}) {
	t.Helper()
	var res json.RawMessage
	select {
	case res = <-answered:
		// Answered while the upstream was still starting: the old
		// behaviour, which the check below refuses. (On a machine so slow
		// that this took the whole wait, the upstream is let through below
		// and the answer is judged the same way.)
	case <-time.After(300 * time.Millisecond): // a waiting answer never comes here: the gate is still shut
	}
	close(gate)
	if res == nil {
		res = <-answered
	}
	if !strings.Contains(string(res), `"completions"`) || !strings.Contains(string(res), "use the slow tools slowly") {
		t.Fatalf("initialize answered without the starting upstream's capabilities and instructions: %s", res)
	}
}
