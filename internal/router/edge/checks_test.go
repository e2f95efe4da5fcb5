package edge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// The admin listener's checks (issue 27.4): a DNS-rebinding page names its
// own domain in Host and is refused on any listen address; scrapers and
// probes that name an IP address, a loopback name or a configured name
// pass; another site's page is refused by Origin or Sec-Fetch-Site, a
// top-level navigation to it is not.
func TestAdminChecks(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, listen := range []string{"127.0.0.1:9091", "0.0.0.0:9091", "[::]:9091"} {
		h := NewAdminChecks(listen, []string{"mcpgw-admin", "MCPGW-Admin.mcp.svc."}).Middleware(zap.NewNop())(ok)
		for _, tc := range []struct {
			name    string
			host    string
			headers map[string]string
			want    int
			body    string
		}{
			{"rebinding name", "attacker.example:9091", nil, 403, "add the name to admin.allowed_hosts"},
			{"rebinding name, no port", "attacker.example", nil, 403, "DNS-rebinding"},
			{"no Host (HTTP/1.0 health check)", "", nil, 200, ""},
			{"loopback address", "127.0.0.1:9091", nil, 200, ""},
			{"IPv6 loopback", "[::1]:9091", nil, 200, ""},
			{"localhost", "LocalHost:9091", nil, 200, ""},
			{"localhost with a trailing dot", "localhost.:9091", nil, 200, ""},
			{"pod IP (Prometheus, kubelet)", "10.1.2.3:9091", nil, 200, ""},
			{"pod IPv6", "[fd00::5]:9091", nil, 200, ""},
			{"configured name", "mcpgw-admin:9091", nil, 200, ""},
			{"configured name, case and dot", "mcpgw-admin.MCP.svc:9091", nil, 200, ""},
			{"own origin", "127.0.0.1:9091", map[string]string{"Origin": "http://127.0.0.1:9091"}, 200, ""},
			{"other origin", "127.0.0.1:9091", map[string]string{"Origin": "https://evil.example"}, 403, "Origin https://evil.example is another site"},
			{"other port's origin", "127.0.0.1:9091", map[string]string{"Origin": "http://127.0.0.1:3000"}, 403, "another site"},
			{"null origin", "127.0.0.1:9091", map[string]string{"Origin": "null"}, 403, "another site"},
			{"cross-site fetch", "127.0.0.1:9091", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"}, 403, "cross-site request"},
			{"same-site fetch", "localhost:9091", map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}, 403, "same-site request"},
			{"cross-site iframe", "127.0.0.1:9091", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, 403, "cross-site"},
			{"link clicked on another site", "127.0.0.1:9091", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, 200, ""},
			{"status page link", "127.0.0.1:9091", map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, 200, ""},
			{"typed URL", "127.0.0.1:9091", map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, 200, ""},
		} {
			r := httptest.NewRequest(http.MethodGet, "/status/catalog", nil)
			r.Host = tc.host
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.want || !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("%s, %s: %d %q; want %d with %q", listen, tc.name, rec.Code, rec.Body.String(), tc.want, tc.body)
			}
			if rec.Code == 403 && !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
				t.Errorf("%s, %s: refusal is %s, want plain text", listen, tc.name, rec.Header().Get("Content-Type"))
			}
		}
	}
}

// The MCP listener's checks are unchanged by the admin variant: any Host on
// a non-loopback listener, loopback names only on a loopback one.
func TestMCPChecksHost(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, tc := range []struct {
		listen, host string
		want         int
	}{
		{"127.0.0.1:8080", "attacker.example:8080", 403},
		{"127.0.0.1:8080", "10.1.2.3:8080", 403},
		{"127.0.0.1:8080", "localhost:8080", 200},
		{"127.0.0.1:8080", "mcp.example.com", 200}, // public_url
		{"0.0.0.0:8080", "attacker.example:8080", 200},
	} {
		h := NewChecks(tc.listen, "https://mcp.example.com", nil).Middleware(zap.NewNop())(ok)
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tc.want {
			t.Errorf("listen %s, Host %s: %d, want %d", tc.listen, tc.host, rec.Code, tc.want)
		}
	}
}
