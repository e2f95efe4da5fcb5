package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// scriptedResult is what the scripted upstream answers to method: the bytes
// of testdata/lossless/<method>.upstream.json, exactly, or a minimal valid
// answer for the handshake.
func scriptedResult(dir, method string) ([]byte, bool) {
	switch method {
	case "initialize":
		return []byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"prompts":{},"resources":{}},"serverInfo":{"name":"scripted","version":"1"}}`), true
	case "ping":
		return []byte(`{}`), true
	}
	file := map[string]string{
		"tools/list": "tools-list", "tools/call": "tools-call", "prompts/list": "prompts-list", "resources/list": "resources-list",
	}[method]
	if file == "" {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(dir, file+".upstream.json"))
	if err != nil {
		return nil, false
	}
	return bytes.TrimSpace(b), true
}

// scriptedAnswer builds the raw response line to one request.
func scriptedAnswer(dir string, m *jsonrpc.Message) []byte {
	res, ok := scriptedResult(dir, m.Method)
	if !ok {
		return []byte(`{"jsonrpc":"2.0","id":` + m.ID.String() + `,"error":{"code":-32601,"message":"no script"}}`)
	}
	// Assembled by hand so that not a byte of the result is re-encoded.
	return []byte(`{"jsonrpc":"2.0","id":` + m.ID.String() + `,"result":` + string(res) + `}`)
}

// serveScriptedStdio is the stdio flavour, run in a child process by TestMain.
func serveScriptedStdio(dir string) {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m, err := jsonrpc.Parse(sc.Bytes())
		if err != nil || m.Kind() != jsonrpc.KindRequest {
			continue
		}
		os.Stdout.Write(append(scriptedAnswer(dir, m), '\n'))
	}
}

func scriptedHTTP(t *testing.T, dir string) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil || m.Kind() != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(scriptedAnswer(dir, m))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestLosslessPassThrough proves invariant 1: whatever an upstream puts in a
// result (unknown fields, _meta, annotations, icons, outputSchema with $defs,
// structuredContent, odd number spellings, escapes) reaches the client byte
// for byte, apart from the rewritten name or URI.
func TestLosslessPassThrough(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("testdata/lossless")
	if err != nil {
		t.Fatal(err)
	}
	exe := stdioUpstream(t)
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			up := "url: " + scriptedHTTP(t, dir)
			if transport == "stdio" {
				up = fmt.Sprintf("command: [%q]\n    env: {MCPGW_TEST_SCRIPTED_STDIO: %q}", exe, dir)
			}
			_, base := startGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  lx:\n    %s\n", up))
			c := &rawClient{t: t, url: base + "/mcp"}
			c.initialize("2025-11-25")
			for _, tc := range []struct{ golden, request string }{
				{"tools-list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
				{"tools-call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lx__search","arguments":{"query":"q"}}}`},
				{"prompts-list", `{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`},
				{"resources-list", `{"jsonrpc":"2.0","id":4,"method":"resources/list"}`},
			} {
				want, err := os.ReadFile(filepath.Join(dir, tc.golden+".downstream.json"))
				if err != nil {
					t.Fatal(err)
				}
				got := c.post(tc.request).last(t)
				if got.Error != nil {
					t.Fatalf("%s: %v", tc.golden, got.Error)
				}
				if !bytes.Equal(got.Result, bytes.TrimSpace(want)) {
					t.Errorf("%s: result differs from golden\n got: %s\nwant: %s", tc.golden, got.Result, want)
				}
			}
		})
	}
}
