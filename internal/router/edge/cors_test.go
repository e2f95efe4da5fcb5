package edge

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
)

func TestCORS(t *testing.T) {
	reached := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.WriteHeader(http.StatusOK)
	})
	h := NewChecks("0.0.0.0:8080", "", []string{"https://app.example.com"}).Middleware(zap.NewNop())(CORS(next))
	do := func(method, origin string, hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://mcp.example.com/mcp", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	pre := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, authorization, mcp-session-id, mcp-protocol-version, mcp-param-region"}

	t.Run("preflight from an allowed origin", func(t *testing.T) {
		reached = 0
		w := do(http.MethodOptions, "https://app.example.com", pre)
		if w.Code != http.StatusNoContent || reached != 0 {
			t.Fatalf("HTTP %d, handler reached %d times; want 204 answered by the middleware", w.Code, reached)
		}
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != "https://app.example.com" {
			t.Errorf("Allow-Origin %q", got)
		}
		if got := w.Header().Get("Access-Control-Allow-Headers"); got != "content-type, authorization, mcp-session-id, mcp-protocol-version, mcp-param-region" {
			t.Errorf("Allow-Headers %q", got)
		}
		if got := w.Header().Get("Access-Control-Allow-Methods"); got != "GET, POST, DELETE" {
			t.Errorf("Allow-Methods %q", got)
		}
	})
	t.Run("preflight from another origin", func(t *testing.T) {
		w := do(http.MethodOptions, "https://evil.example", pre)
		if w.Code != http.StatusForbidden || w.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("HTTP %d, Allow-Origin %q; want 403 and no CORS header", w.Code, w.Header().Get("Access-Control-Allow-Origin"))
		}
	})
	t.Run("preflight for a header MCP does not use", func(t *testing.T) {
		w := do(http.MethodOptions, "https://app.example.com", map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-evil"})
		if w.Code != http.StatusForbidden || w.Header().Get("Access-Control-Allow-Headers") != "" {
			t.Fatalf("HTTP %d; want 403", w.Code)
		}
	})
	t.Run("preflight for a method MCP does not use", func(t *testing.T) {
		for _, m := range []string{"PUT", "ET", ""} {
			w := do(http.MethodOptions, "https://app.example.com", map[string]string{"Access-Control-Request-Method": m})
			if m == "" {
				if w.Code == http.StatusNoContent {
					t.Error("an OPTIONS without Access-Control-Request-Method was answered as a preflight")
				}
				continue
			}
			if w.Code != http.StatusForbidden {
				t.Errorf("method %q: HTTP %d; want 403", m, w.Code)
			}
		}
	})
	t.Run("request from an allowed origin", func(t *testing.T) {
		reached = 0
		w := do(http.MethodPost, "https://app.example.com", nil)
		if w.Code != http.StatusOK || reached != 1 {
			t.Fatalf("HTTP %d, reached %d", w.Code, reached)
		}
		if w.Header().Get("Access-Control-Allow-Origin") != "https://app.example.com" || w.Header().Get("Access-Control-Expose-Headers") == "" {
			t.Errorf("headers %v; want Allow-Origin and Expose-Headers", w.Header())
		}
	})
	t.Run("request without Origin", func(t *testing.T) {
		w := do(http.MethodPost, "", nil)
		if w.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Error("CORS headers on a request that is no browser's cross-origin request")
		}
	})
}
