package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// rawClient speaks MCP over plain HTTP so tests can see status codes,
// headers and exact bytes.
type rawClient struct {
	t       *testing.T
	url     string
	session string
	header  http.Header // extra headers on every request
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
	msgs   []*jsonrpc.Message // JSON body or every SSE message
}

// last is the final message of the answer (the response on an SSE stream).
func (r *rawResponse) last(t *testing.T) *jsonrpc.Message {
	t.Helper()
	if len(r.msgs) == 0 {
		t.Fatalf("no JSON-RPC message in answer (HTTP %d): %s", r.status, r.body)
	}
	return r.msgs[len(r.msgs)-1]
}

func (c *rawClient) do(method, body string, mutate func(*http.Request)) *rawResponse {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if mutate != nil {
		mutate(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	out := &rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(bytes.NewReader(b), 1<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if m, err := jsonrpc.Parse(ev.Data); err == nil {
				out.msgs = append(out.msgs, m)
			}
		}
	} else if len(bytes.TrimSpace(b)) > 0 {
		if m, err := jsonrpc.Parse(b); err == nil {
			out.msgs = append(out.msgs, m)
		} else if m != nil {
			out.msgs = append(out.msgs, m)
		}
	}
	return out
}

func (c *rawClient) post(body string) *rawResponse { return c.do(http.MethodPost, body, nil) }

// initialize starts a session and keeps its id.
func (c *rawClient) initialize(version string) *rawResponse {
	c.t.Helper()
	r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r.status != http.StatusOK {
		c.t.Fatalf("initialize: HTTP %d %s", r.status, r.body)
	}
	c.session = r.header.Get("Mcp-Session-Id")
	if c.session == "" {
		c.t.Fatal("initialize: no Mcp-Session-Id")
	}
	if r2 := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r2.status != http.StatusAccepted {
		c.t.Fatalf("initialized: HTTP %d", r2.status)
	}
	return r
}

// errorOf returns the JSON-RPC error of the answer, failing if there is none.
func errorOf(t *testing.T, r *rawResponse) *jsonrpc.Error {
	t.Helper()
	m := r.last(t)
	if m.Error == nil {
		t.Fatalf("want a JSON-RPC error, got result %s", m.Result)
	}
	return m.Error
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
