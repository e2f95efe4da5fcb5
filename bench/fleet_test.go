package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHAProxyConfig runs the fleet rows' HAProxy configurations in front
// of three servers that name themselves: in http mode a session's
// requests all reach one server and requests without a session go round
// robin (over the hash's ring: each server, not in strict turn); in tcp
// mode each connection goes to the next server.
func TestHAProxyConfig(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy not installed")
	}
	var addrs []string
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, strconv.Itoa(i))
		}))
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	start := func(mode string) string {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cfg := filepath.Join(dir, mode+".cfg")
		if err := os.WriteFile(cfg, []byte(haproxyConfig(mode, port, addrs)), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
			t.Fatalf("haproxy -c: %v\n%s", err, out)
		}
		p, err := startExt(dir, mode, bin, "-db", "-f", cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if err := waitListen(addr, p); err != nil {
			t.Fatal(err)
		}
		return "http://" + addr + "/mcp"
	}
	served := func(c *http.Client, url, session string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		return string(b)
	}

	url := start("http")
	c := &http.Client{} // one kept connection: HAProxy balances each request
	for s := range 6 {
		session := "session-" + strconv.Itoa(s)
		first := served(c, url, session)
		for range 4 {
			if got := served(c, url, session); got != first {
				t.Fatalf("http: %s reached server %s, then %s: the session is not kept on one replica", session, first, got)
			}
		}
	}
	seen := map[string]bool{}
	for range 30 { // round robin over the consistent hash's ring: every server, not in strict turn
		seen[served(c, url, "")] = true
	}
	if len(seen) != 3 {
		t.Errorf("http: 30 requests without a session reached %v, want all 3 servers", seen)
	}

	url = start("tcp")
	seen = map[string]bool{}
	for range 3 {
		fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // a connection each
		seen[served(fresh, url, "session-0")] = true
	}
	if len(seen) != 3 {
		t.Errorf("tcp: three connections reached %v, want all 3 servers in turn", seen)
	}
}
