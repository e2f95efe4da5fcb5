package streamable

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// roundTrip is an in-memory http.RoundTripper: the replica holding a call.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestForwardRetry(t *testing.T) {
	msg := &jsonrpc.Message{ID: jsonrpc.IntID(7), Method: mcp.MethodToolsCall, Params: []byte(`{"name":"up__x","requestState":"mcpgw1.s"}`)}
	retry := func(h http.Header) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://b.example/mcp?x=1", strings.NewReader("already read"))
		for k, v := range h {
			r.Header[k] = v
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		in      http.Header
		holder  roundTrip
		code    int    // JSON-RPC error code; 0: forwarded
		status  int    // when forwarded
		body    string // when forwarded
		headers string // the response headers kept, when forwarded
	}{
		{
			name: "forwarded and streamed back",
			in:   http.Header{"Authorization": {"Bearer t"}, "Accept-Encoding": {"br"}, "Connection": {"x-hop"}, "X-Hop": {"1"}},
			holder: func(r *http.Request) (*http.Response, error) {
				body, _ := io.ReadAll(r.Body)
				switch {
				case r.URL.String() != "http://10.0.0.5:8080/mcp":
					return nil, errors.New("wrong URL " + r.URL.String())
				case r.Header.Get(forwardedHeader) != "1" || r.Header.Get("Authorization") != "Bearer t":
					return nil, errors.New("headers not passed")
				case r.Header.Get("X-Hop") != "" || r.Header.Get("Accept-Encoding") == "br":
					return nil, errors.New("hop-by-hop or encoding headers passed")
				case !strings.Contains(string(body), `"requestState":"mcpgw1.s"`):
					return nil, errors.New("body not re-sent: " + string(body))
				}
				h := http.Header{"Content-Type": {"text/event-stream"}, "X-Request-Id": {"holder's"}}
				return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("data: {}\n\n"))}, nil
			},
			status: 200, body: "data: {}\n\n", headers: "Content-Type",
		},
		{
			name:   "forwarded once only",
			in:     http.Header{forwardedHeader: {"1"}},
			holder: func(*http.Request) (*http.Response, error) { panic("forwarded twice") },
			code:   jsonrpc.CodeInvalidParams,
		},
		{
			name:   "holder unreachable",
			holder: func(*http.Request) (*http.Response, error) { return nil, errors.New("connection refused") },
			code:   mcp.CodeUpstreamUnavailable,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Transport{log: zap.NewNop(), core: core.New(nil, core.Options{}), forward: tc.holder}
			defer tr.core.Close(func() {})
			w := httptest.NewRecorder()
			err := tr.forwardRetry(w, retry(tc.in), "http://10.0.0.5:8080", msg)
			if tc.code != 0 {
				if err == nil || err.Code != tc.code {
					t.Fatalf("forwardRetry = %v, want code %d", err, tc.code)
				}
				if w.Body.Len() != 0 || len(w.Header()) != 0 {
					t.Errorf("wrote %q %v before failing; the caller answers", w.Body, w.Header())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for k := range w.Header() {
				kept = append(kept, k)
			}
			if w.Code != tc.status || w.Body.String() != tc.body || strings.Join(kept, ",") != tc.headers {
				t.Errorf("answer %d %q headers %v; want %d %q with %s", w.Code, w.Body, kept, tc.status, tc.body, tc.headers)
			}
		})
	}
}
