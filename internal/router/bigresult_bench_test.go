package router_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/memhttp"
	"github.com/mcpgw/mcpgw/internal/router"
)

// The 1 MiB answer path of issue 18: a session-revision upstream answers a
// stateless (2026-07-28) tools/call with a 1 MiB result on an SSE stream;
// the gateway reads it, shapes it for the stateless caller and writes it
// as JSON (the caller accepts only JSON) or as SSE (an earlier log message
// on the upstream's stream opened the caller's stream). Nothing listens:
// the upstream is served in memory (memhttp) and the downstream writer
// discards what it is given, so B/op is the gateway's own copies. Run with
//
//	go test -run '^$' -bench BigResult -benchmem -count 5 ./internal/router

// bigText is the text of the big tool's result.
var bigText = strings.Repeat("x", 1<<20)

// bigResult is the big tool's result as the upstream sends it.
var bigResult = `{"content":[{"type":"text","text":"` + bigText + `"}],"isError":false}`

// bigUpstream is a 2025-11-25 Streamable HTTP server with one tool, big,
// answered on an SSE stream (a log message first when withLog), written
// piecewise so that the upstream allocates nothing per call.
func bigUpstream(withLog bool) http.Handler {
	result := []byte(bigResult) // io.WriteString would copy it per call
	logEvent := []byte("event: message\ndata: " + `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}` + "\n\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if msg.Kind() != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var res string
		switch msg.Method {
		case mcp.MethodInitialize:
			w.Header().Set("Mcp-Session-Id", "big")
			res = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"big","version":"1"}}`
		case mcp.MethodToolsList:
			res = `{"tools":[{"name":"big","inputSchema":{"type":"object"}}]}`
		case mcp.MethodToolsCall:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			if withLog {
				_, _ = w.Write(logEvent)
			}
			_, _ = io.WriteString(w, `event: message`+"\n"+`data: {"jsonrpc":"2.0","id":`)
			_, _ = w.Write(msg.ID)
			_, _ = io.WriteString(w, `,"result":`)
			_, _ = w.Write(result)
			_, _ = io.WriteString(w, "}\n\n")
			return
		default:
			res = `{}`
		}
		out, _ := jsonrpc.Encode(jsonrpc.NewResult(msg.ID, []byte(res)))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// discardWriter is a ResponseWriter that keeps only the size and the first
// and last bytes of what it is given (keep: all of it).
type discardWriter struct {
	h      http.Header
	status int
	n      int
	head   []byte
	tail   [64]byte
	keep   *bytes.Buffer
}

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) WriteHeader(s int) {
	if d.status == 0 {
		d.status = s
	}
}
func (d *discardWriter) Flush() {}
func (d *discardWriter) Write(b []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	if d.keep != nil {
		d.keep.Write(b)
	}
	if len(d.head) < cap(d.head) {
		d.head = append(d.head, b[:min(len(b), cap(d.head)-len(d.head))]...)
	}
	d.n += len(b)
	if len(b) >= len(d.tail) {
		copy(d.tail[:], b[len(b)-len(d.tail):])
	} else {
		copy(d.tail[:], d.tail[len(b):])
		copy(d.tail[len(d.tail)-len(b):], b)
	}
	return len(b), nil
}

func (d *discardWriter) reset() {
	clear(d.h)
	d.status, d.n, d.head = 0, 0, d.head[:0]
}

// bigRouter is a router with one route over the big upstream "up".
func bigRouter(tb testing.TB, withLog bool) http.Handler {
	tb.Helper()
	cfg, err := config.Parse("big.yaml", []byte("upstreams:\n  up: {url: http://up.test/mcp, timeout: 10s, protocol: legacy}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	h := host.New(cfg, host.Options{Logger: zap.NewNop(), HTTPClient: memhttp.Client(bigUpstream(withLog))})
	h.Start()
	tb.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	rt := router.New(cfg, h, router.Options{Logger: zap.NewNop()})
	tb.Cleanup(rt.Close)
	return rt
}

const bigCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__big","arguments":{},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}}`

func bigRequest(accept string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(bigCall))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", accept)
	r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	r.Header.Set("Mcp-Method", "tools/call")
	r.Header.Set("Mcp-Name", "up__big")
	return r
}

// wantBig is what the caller must get: the upstream's result, member for
// member and byte for byte, with the resultType a stateless caller is
// owed, under the caller's own id.
const wantBigHead = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"xxx`

func checkBig(tb testing.TB, body string, sse bool) {
	tb.Helper()
	if sse {
		i := strings.LastIndex(body, "data: ")
		if i < 0 || !strings.HasSuffix(body, "\n\n") {
			tb.Fatalf("not an event stream: %.200q … %q", body, body[max(0, len(body)-64):])
		}
		if !strings.Contains(body[:i], "notifications/message") {
			tb.Errorf("the log message did not come first: %.300q", body)
		}
		body = strings.TrimSuffix(body[i+len("data: "):], "\n\n")
	}
	want := `{"jsonrpc":"2.0","id":7,"result":` + strings.TrimSuffix(bigResult, "}") + `,"resultType":"complete"}}`
	if body != want {
		tb.Fatalf("answer differs from the upstream's result: got %.100q … %q (%d bytes), want … %q (%d bytes)",
			body, body[max(0, len(body)-64):], len(body), want[len(want)-64:], len(want))
	}
}

func BenchmarkBigResult(b *testing.B) {
	for _, tc := range []struct {
		name, accept string
		sse          bool
	}{
		{"sse-in/json-out", "application/json", false},
		{"sse-in/sse-out", "application/json, text/event-stream", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rt := bigRouter(b, tc.sse)
			// One call kept whole, to check it, then discarded ones.
			full := &discardWriter{h: http.Header{}, head: make([]byte, 0, 128), keep: &bytes.Buffer{}}
			rt.ServeHTTP(full, bigRequest(tc.accept))
			if full.status != http.StatusOK {
				b.Fatalf("status %d: %.300s", full.status, full.keep.String())
			}
			checkBig(b, full.keep.String(), tc.sse)
			w := &discardWriter{h: http.Header{}, head: make([]byte, 0, len(wantBigHead))}
			b.SetBytes(int64(len(bigResult)))
			b.ReportAllocs()
			for b.Loop() {
				w.reset()
				rt.ServeHTTP(w, bigRequest(tc.accept))
				if w.n < len(bigResult) || (!tc.sse && string(w.head) != wantBigHead) {
					b.Fatalf("answer of %d bytes starting %q", w.n, w.head)
				}
			}
		})
	}
}
