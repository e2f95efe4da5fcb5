package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// upstream is the MCP server behind every replica: each replica's calls
// carry its name (X-Replica, from the shared config's ${REPLICA}), which
// the tools answer with, so the test sees which replica's connection ran a
// call.
type upstream struct {
	srv    *mcp.Server
	subs   sync.Map // replica -> *atomic.Int64: resources/subscribe received
	unsubs sync.Map // replica -> *atomic.Int64: resources/unsubscribe received

	// stateful is the server of the stateful upstream "st": its "count"
	// tool counts the calls of each upstream session (counts: session id
	// -> *atomic.Int64); inits counts the initializes it was sent.
	stateful *mcp.Server
	counts   sync.Map
	inits    atomic.Int64
}

// statefulHandler serves u.stateful, counting initializes.
func (u *upstream) statefulHandler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.stateful }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				u.inits.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

const docURI = "mem://doc"

func newUpstream() *upstream {
	u := &upstream{}
	u.srv = mcp.NewServer(&mcp.Implementation{Name: "fleet-up", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			n, _ := u.subs.LoadOrStore(replicaOf(req.Extra), &atomic.Int64{})
			n.(*atomic.Int64).Add(1)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			n, _ := u.unsubs.LoadOrStore(replicaOf(req.Extra), &atomic.Int64{})
			n.(*atomic.Int64).Add(1)
			return nil
		},
	})
	u.srv.AddResource(&mcp.Resource{URI: docURI, Name: "doc", MIMEType: "text/plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: docURI, Text: "doc"}}}, nil
	})
	type empty struct{}
	mcp.AddTool(u.srv, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
		return text("replica=" + replicaOf(req.Extra)), nil, nil
	})
	mcp.AddTool(u.srv, &mcp.Tool{Name: "limited"}, func(context.Context, *mcp.CallToolRequest, empty) (*mcp.CallToolResult, any, error) {
		return text("ok"), nil, nil
	})
	mcp.AddTool(u.srv, &mcp.Tool{Name: "touch"}, func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
		err := u.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: docURI})
		return text(fmt.Sprintf("touched by %s: %v", replicaOf(req.Extra), err)), nil, nil
	})
	type ticks struct {
		N  int `json:"n"`
		MS int `json:"ms"`
	}
	mcp.AddTool(u.srv, &mcp.Tool{Name: "ticks"}, func(ctx context.Context, req *mcp.CallToolRequest, a ticks) (*mcp.CallToolResult, any, error) {
		for i := range a.N {
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond): // the behaviour under test: a tool that ticks
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Message: fmt.Sprintf("tick %d", i+1)})
		}
		return text(fmt.Sprintf("ticked %d on %s", a.N, replicaOf(req.Extra))), nil, nil
	})
	u.stateful = mcp.NewServer(&mcp.Implementation{Name: "fleet-stateful", Version: "1"}, nil)
	mcp.AddTool(u.stateful, &mcp.Tool{Name: "count"}, func(_ context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
		n, _ := u.counts.LoadOrStore(req.Session.ID(), &atomic.Int64{})
		return text(fmt.Sprintf("count=%d on %s", n.(*atomic.Int64).Add(1), replicaOf(req.Extra))), nil, nil
	})
	return u
}

func count(m *sync.Map, replica string) int64 {
	n, ok := m.Load(replica)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func (u *upstream) subscribes() map[string]int64 {
	out := map[string]int64{}
	u.subs.Range(func(k, v any) bool { out[k.(string)] = v.(*atomic.Int64).Load(); return true })
	return out
}

func replicaOf(e *mcp.RequestExtra) string {
	if e == nil || e.Header == nil {
		return "?"
	}
	return e.Header.Get("X-Replica")
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// client is a raw Streamable HTTP client of one session, through HAProxy.
type client struct {
	t       *testing.T
	url     string
	session string
	hc      *http.Client
}

func newClient(t *testing.T, url string) *client {
	c := &client{t: t, url: url, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	c.initialize()
	return c
}

// answer is one POST's outcome: the JSON-RPC messages and the replica
// that served it.
type answer struct {
	status int
	by     string
	msgs   []*jsonrpc.Message
}

func (a answer) last(t *testing.T) *jsonrpc.Message {
	t.Helper()
	if len(a.msgs) == 0 {
		t.Fatalf("no message in the answer (HTTP %d from %s)", a.status, a.by)
	}
	return a.msgs[len(a.msgs)-1]
}

func (c *client) initialize() {
	c.t.Helper()
	a := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fleet-raw","version":"1"}}}`)
	if m := a.last(c.t); m.Error != nil {
		c.t.Fatalf("initialize: %v", m.Error)
	}
	if c.session == "" {
		c.t.Fatal("initialize: no Mcp-Session-Id")
	}
	if a := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: HTTP %d", a.status)
	}
}

func (c *client) request(method, body, lastID string) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.url, strings.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.session = sid
	}
	return resp
}

// post sends one message and reads the whole answer.
func (c *client) post(body string) answer {
	c.t.Helper()
	resp := c.request(http.MethodPost, body, "")
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, by: resp.Header.Get("X-Served-By")}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r := sse.NewReader(resp.Body, 1<<20)
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			if len(ev.Data) == 0 {
				continue
			}
			m, err := jsonrpc.Parse(ev.Data)
			if err != nil {
				c.t.Fatalf("event %q: %v", ev.Data, err)
			}
			a.msgs = append(a.msgs, m)
		}
		return a
	}
	b, _ := io.ReadAll(resp.Body)
	if len(strings.TrimSpace(string(b))) > 0 && resp.StatusCode < 300 {
		m, err := jsonrpc.Parse(b)
		if err != nil {
			c.t.Fatalf("answer %q: %v", b, err)
		}
		a.msgs = append(a.msgs, m)
	}
	return a
}

// call runs tools/call name and returns the answer.
func (c *client) call(id int, name, args string) answer {
	c.t.Helper()
	if args == "" {
		args = "{}"
	}
	return c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args))
}

// resultText is the first text content of a tools/call result.
func resultText(t *testing.T, m *jsonrpc.Message) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error %d: %s", m.Error.Code, m.Error.Message)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 || r.IsError {
		t.Fatalf("result %s: want text content", m.Result)
	}
	return r.Content[0].Text
}

// stream is an SSE response being read.
type stream struct {
	t    *testing.T
	resp *http.Response
	r    *sse.Reader
	by   string
}

func (c *client) open(method, body, lastID string) *stream {
	c.t.Helper()
	resp := c.request(method, body, lastID)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.t.Fatalf("%s: HTTP %d %s %s, want an event stream", method, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return &stream{t: c.t, resp: resp, r: sse.NewReader(resp.Body, 1<<20), by: resp.Header.Get("X-Served-By")}
}

// event is one SSE event with a message.
type event struct {
	id  string
	msg *jsonrpc.Message
}

// next reads the next event with data, or fails after d.
func (s *stream) next(d time.Duration) (event, bool) {
	s.t.Helper()
	type res struct {
		ev  sse.Event
		err error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			ev, err := s.r.Next()
			if err != nil || len(ev.Data) > 0 {
				ch <- res{ev, err}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return event{}, false
		}
		m, err := jsonrpc.Parse(r.ev.Data)
		if err != nil {
			s.t.Fatalf("event %q: %v", r.ev.Data, err)
		}
		return event{r.ev.ID, m}, true
	case <-time.After(d): // the caller's bound: long for an event awaited, short for a negative check
		s.resp.Body.Close() // unblocks the reader
		<-ch
		return event{}, false
	}
}

func (s *stream) close() { s.resp.Body.Close() }
