package gatewaytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// RawClient speaks MCP over plain HTTP so tests can see status codes,
// headers and exact bytes.
type RawClient struct {
	T       *testing.T
	URL     string
	Session string
	Header  http.Header // extra headers on every request
}

type RawResponse struct {
	Status int
	Header http.Header
	Body   []byte
	Msgs   []*jsonrpc.Message // JSON body or every SSE message
}

// Last is the final message of the answer (the response on an SSE stream).
func (r *RawResponse) Last(t *testing.T) *jsonrpc.Message {
	t.Helper()
	if len(r.Msgs) == 0 {
		t.Fatalf("no JSON-RPC message in answer (HTTP %d): %s", r.Status, r.Body)
	}
	return r.Msgs[len(r.Msgs)-1]
}

func (c *RawClient) Do(method, body string, mutate func(*http.Request)) *RawResponse {
	c.T.Helper()
	req, err := http.NewRequest(method, c.URL, strings.NewReader(body))
	if err != nil {
		c.T.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	if mutate != nil {
		mutate(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.T.Fatal(err)
	}
	out := &RawResponse{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(bytes.NewReader(b), 1<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if m, err := jsonrpc.Parse(ev.Data); err == nil {
				out.Msgs = append(out.Msgs, m)
			}
		}
	} else if len(bytes.TrimSpace(b)) > 0 {
		if m, err := jsonrpc.Parse(b); err == nil {
			out.Msgs = append(out.Msgs, m)
		} else if m != nil {
			out.Msgs = append(out.Msgs, m)
		}
	}
	return out
}

func (c *RawClient) Post(body string) *RawResponse { return c.Do(http.MethodPost, body, nil) }

// Initialize starts a session and keeps its id.
func (c *RawClient) Initialize(version string) *RawResponse {
	c.T.Helper()
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r.Status != http.StatusOK {
		c.T.Fatalf("initialize: HTTP %d %s", r.Status, r.Body)
	}
	c.Session = r.Header.Get("Mcp-Session-Id")
	if c.Session == "" {
		c.T.Fatal("initialize: no Mcp-Session-Id")
	}
	if r2 := c.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r2.Status != http.StatusAccepted {
		c.T.Fatalf("initialized: HTTP %d", r2.Status)
	}
	return r
}

// ErrorOf returns the JSON-RPC error of the answer, failing if there is none.
func ErrorOf(t *testing.T, r *RawResponse) *jsonrpc.Error {
	t.Helper()
	m := r.Last(t)
	if m.Error == nil {
		t.Fatalf("want a JSON-RPC error, got result %s", m.Result)
	}
	return m.Error
}

func MustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func CallBody(id int, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params)
}

// Call sends method with params (marshalled) as request id 1 and returns
// the last message of the answer.
func (c *RawClient) Call(method string, params any) *jsonrpc.Message {
	c.T.Helper()
	return c.Post(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + MustJSON(c.T, params) + `}`).Last(c.T)
}
