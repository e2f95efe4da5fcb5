package streamable

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/router/core"
)

// The checks a stateless (2026-07-28) request passes before anything else:
// its _meta and the headers that mirror the body.
func TestStatelessSession(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/logLevel":"info"}`
	good := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"up__echo"}}
	with := func(k, v string) http.Header {
		h := good.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		params  string
		headers http.Header
		code    int    // 0: accepted
		message string // a substring of the refusal
	}{
		{"accepted", `{"name":"up__echo",` + meta + `}`, good, 0, ""},
		{"name in the sentinel", `{"name":"up__échо",` + meta + `}`, with("Mcp-Name", mcp.EncodeHeaderValue("up__échо")), 0, ""},
		{"no _meta", `{"name":"up__echo"}`, good, jsonrpc.CodeInvalidParams, "params._meta is required"},
		{"no version", `{"name":"up__echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`, good, jsonrpc.CodeInvalidParams, "protocolVersion"},
		{"no capabilities", `{"name":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, good, jsonrpc.CodeInvalidParams, "clientCapabilities"},
		{"version header differs", `{"name":"up__echo",` + meta + `}`, with("Mcp-Protocol-Version", "2025-11-25"), mcp.CodeHeaderMismatch, "MCP-Protocol-Version"},
		{"unknown stateless revision", `{"name":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`, with("Mcp-Protocol-Version", "2099-01-01"), mcp.CodeUnsupportedProtocolVersion, "2099-01-01"},
		{"method header differs", `{"name":"up__echo",` + meta + `}`, with("Mcp-Method", "prompts/get"), mcp.CodeHeaderMismatch, "Mcp-Method"},
		{"name header missing", `{"name":"up__echo",` + meta + `}`, with("Mcp-Name", ""), mcp.CodeHeaderMismatch, "Mcp-Name"},
		{"name header differs", `{"name":"up__echo",` + meta + `}`, with("Mcp-Name", "up__other"), mcp.CodeHeaderMismatch, "Mcp-Name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header = tc.headers
			msg := jsonrpc.NewRequest(jsonrpc.IntID(1), mcp.MethodToolsCall, []byte(tc.params))
			sess, err := (&Transport{}).statelessSession(r, &core.Route{Path: "/mcp"}, msg, mcp.ReadParams(msg.Method, msg.Params))
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				defer sess.End()
				if !sess.Stateless() || sess.Version() != mcp.Version20260728 || sess.Route().Path != "/mcp" {
					t.Errorf("session %v %v", sess.Version(), sess.Stateless())
				}
				return
			}
			if err == nil || err.Code != tc.code || !strings.Contains(err.Message, tc.message) {
				t.Errorf("got %v, want code %d mentioning %q", err, tc.code, tc.message)
			}
			if got := core.StatelessStatus(tc.code); got != http.StatusBadRequest {
				t.Errorf("code %d answers HTTP %d, want 400", tc.code, got)
			}
		})
	}
}

// isStateless tells a 2026-07-28 request from a session revision's first
// POST without a session id.
func TestIsStateless(t *testing.T) {
	for _, tc := range []struct {
		header, method, params string
		want                   bool
	}{
		{"", mcp.MethodInitialize, `{"protocolVersion":"2025-11-25"}`, false},
		{"2025-06-18", mcp.MethodToolsList, `{}`, false},
		{"2026-07-28", mcp.MethodToolsList, `{}`, true},
		{"", mcp.MethodServerDiscover, `{}`, true},
		{"", mcp.MethodToolsList, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, true},
		{"", mcp.MethodToolsList, `{"_meta":{"progressToken":1}}`, false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if tc.header != "" {
			r.Header.Set(mcp.HeaderProtocolVersion, tc.header)
		}
		if got := isStateless(r, jsonrpc.NewRequest(jsonrpc.IntID(1), tc.method, []byte(tc.params)), mcp.ReadParams(tc.method, []byte(tc.params))); got != tc.want {
			t.Errorf("isStateless(%q, %s %s) = %v", tc.header, tc.method, tc.params, got)
		}
	}
}
