package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// adminDo sends GET admin+path with the given Host (empty: the address)
// and headers, and returns the status and body.
func adminDo(t *testing.T, admin, path, host string, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var adminPaths = []string{"/", "/status/catalog?route=/mcp", "/status/config", "/status/upstreams", "/status/reloads", "/metrics", "/healthz", "/readyz"}

// Issue 27.4: a page that rebinds its own name to the admin listener's
// address, or fetches it from another site, is refused on every admin
// path, while the address itself, loopback names and admin.allowed_hosts
// (what Prometheus, probes and a Kubernetes Service name) are served.
func TestAdminRefusesRebindingAndCrossSite(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, _, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: "127.0.0.1:0", allowed_hosts: [mcpgw-admin.monitoring.svc]}
upstreams:
  alpha: {url: %s}
`, alpha), gateway.Options{})
	port := admin[strings.LastIndex(admin, ":")+1:]
	for _, p := range adminPaths {
		if code, body, _ := adminDo(t, admin, p, "attacker.example:"+port, nil); code != http.StatusForbidden || !strings.Contains(body, "admin.allowed_hosts") {
			t.Errorf("%s with Host attacker.example: %d %.200s; want 403 naming admin.allowed_hosts", p, code, body)
		}
		if code, body, _ := adminDo(t, admin, p, "", map[string]string{"Origin": "https://evil.example"}); code != http.StatusForbidden {
			t.Errorf("%s from Origin https://evil.example: %d %.200s; want 403", p, code, body)
		}
		if code, body, _ := adminDo(t, admin, p, "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}); code != http.StatusForbidden {
			t.Errorf("%s fetched cross-site: %d %.200s; want 403", p, code, body)
		}
		for _, host := range []string{"", "localhost:" + port, "mcpgw-admin.monitoring.svc:" + port} {
			origin := "http://" + host // the page the listener served under that name
			if host == "" {
				origin = admin
			}
			if code, body, _ := adminDo(t, admin, p, host, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": origin}); code != http.StatusOK && !(p == "/readyz" && code == http.StatusServiceUnavailable) {
				t.Errorf("%s with Host %q: %d %.200s; want it served", p, host, code, body)
			}
		}
	}
}

// Issue 27.4: with admin.token_file the status page, /status/* and
// /debug/* need the token (bearer, or the Basic password a browser sends);
// probes and, unless protect_metrics, /metrics stay open; a reload rereads
// the file (rotation) and applies protect_metrics.
func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "admin-token")
	const tok1, tok2 = "first-admin-token-0123456789", "second-admin-token-9876543210"
	if err := os.WriteFile(tokFile, []byte(tok1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	gw, _, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: "127.0.0.1:0", pprof: true, token_file: %s}
upstreams:
  alpha: {url: %s}
`, tokFile, alpha), gateway.Options{})
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	for _, p := range []string{"/", "/status", "/status/catalog?route=/mcp", "/status/config", "/status/upstreams", "/status/reloads", "/debug/pprof/", "/nope"} {
		code, body, h := adminDo(t, admin, p, "", nil)
		if code != http.StatusUnauthorized || !strings.Contains(body, "admin.token_file") || !strings.Contains(strings.Join(h.Values("WWW-Authenticate"), ","), "Basic") {
			t.Errorf("%s without the token: %d %q %v; want 401 naming admin.token_file, with a Basic challenge", p, code, body, h.Values("WWW-Authenticate"))
		}
		if code, _, _ := adminDo(t, admin, p, "", bearer("wrong-token-0123456789abc")); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", p, code)
		}
		if code, _, _ := adminDo(t, admin, p, "", bearer(tok1[:len(tok1)-1])); code != http.StatusUnauthorized {
			t.Errorf("%s with a prefix of the token: %d, want 401", p, code)
		}
		want := http.StatusOK
		if p == "/nope" {
			want = http.StatusNotFound
		}
		if code, body, _ := adminDo(t, admin, p, "", bearer(tok1)); code != want {
			t.Errorf("%s with the token: %d %.200s, want %d", p, code, body, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, admin+"/status/config", nil)
	req.SetBasicAuth("anyone", tok1)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("Basic with the token as password: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, body, _ := adminDo(t, admin, p, "", nil); code != http.StatusOK {
			t.Errorf("%s without the token: %d %.200s, want it open", p, code, body)
		}
	}

	// Rotate the token and protect /metrics: a reload applies both.
	if err := os.WriteFile(tokFile, []byte(tok2), 0o600); err != nil {
		t.Fatal(err)
	}
	next := *gw.Config()
	na := *next.Admin
	na.ProtectMetrics = true
	next.Admin = &na
	if err := gw.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := adminDo(t, admin, "/status/config", "", bearer(tok1)); code != http.StatusUnauthorized {
		t.Errorf("old token after rotation: %d, want 401", code)
	}
	if code, _, _ := adminDo(t, admin, "/status/config", "", bearer(tok2)); code != http.StatusOK {
		t.Errorf("new token after rotation: %d, want 200", code)
	}
	if code, _, _ := adminDo(t, admin, "/metrics", "", nil); code != http.StatusUnauthorized {
		t.Errorf("/metrics with protect_metrics, no token: %d, want 401", code)
	}
	if code, _, _ := adminDo(t, admin, "/metrics", "", bearer(tok2)); code != http.StatusOK {
		t.Errorf("/metrics with protect_metrics and the token: %d, want 200", code)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _, _ := adminDo(t, admin, p, "", nil); code != http.StatusOK {
			t.Errorf("%s with protect_metrics: %d, want open", p, code)
		}
	}

	// A token file that went missing fails the reload; the old token holds.
	_ = os.Remove(tokFile)
	if err := gw.Reload(&next); err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Errorf("reload with the token file gone: %v, want an error naming admin.token_file", err)
	}
	if code, _, _ := adminDo(t, admin, "/status/config", "", bearer(tok2)); code != http.StatusOK {
		t.Errorf("after a failed reload: %d, want the token in force kept", code)
	}
}

// HAProxy's `option httpchk GET /readyz` (deploy/fleet/haproxy.cfg) sends
// HTTP/1.0 without a Host header; the admin listener's Host check lets it
// through (no browser omits Host).
func TestAdminHTTP10HealthCheckWithoutHost(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, _, admin := gatewaytest.StartAdminGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nadmin: {listen: \"127.0.0.1:0\"}\nupstreams:\n  alpha: {url: %s}\n", alpha), gateway.Options{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(admin, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /readyz HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.0 200") {
		t.Errorf("HTTP/1.0 /readyz without Host: %q %v, want 200", line, err)
	}
}
