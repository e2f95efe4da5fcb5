package limits

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name       string
		r          Refusal
		status     int
		retryAfter string
	}{
		{"replica bound", Refusal{Bound: "sessions.max_sessions", Max: 10, What: "sessions"}, http.StatusServiceUnavailable, "5"},
		{"principal share", Refusal{Bound: "sessions.max_sessions_per_principal", Max: 3, What: "sessions for this principal", PerPrincipal: true, RetryAfter: 30}, http.StatusTooManyRequests, "30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tc.r.Write(w, jsonrpc.ID(`"a"`))
			if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retryAfter || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("HTTP %d, Retry-After %q, Content-Type %q", w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"))
			}
			m, err := jsonrpc.Parse(w.Body.Bytes())
			if err != nil || m.Error == nil || string(m.ID) != `"a"` {
				t.Fatalf("body %s: %v", w.Body, err)
			}
			var data struct {
				Bound      string `json:"bound"`
				Max        int    `json:"max"`
				RetryAfter int    `json:"retryAfterSeconds"`
			}
			if err := json.Unmarshal(m.Error.Data, &data); err != nil || data.Bound != tc.r.Bound || data.Max != tc.r.Max || data.RetryAfter < 1 {
				t.Errorf("data %s", m.Error.Data)
			}
			if m.Error.Code != mcp.CodeRateLimited || !strings.Contains(m.Error.Message, tc.r.Bound) || !strings.Contains(m.Error.Message, tc.r.What) {
				t.Errorf("error %d %q: want %d naming %s and what is full", m.Error.Code, m.Error.Message, mcp.CodeRateLimited, tc.r.Bound)
			}
		})
	}
}
