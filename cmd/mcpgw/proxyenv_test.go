package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/demo"
	"github.com/mcpgw/mcpgw/internal/tlsconf/tlstest"
)

// Issue 31, proxies from the environment: with HTTPS_PROXY set, mcpgw run
// reaches an https upstream only through the proxy's CONNECT (the upstream
// is named upstream.test, which only the proxy can resolve: this machine
// has no DNS for it), with its TLS verified end to end; with NO_PROXY
// naming the upstream's host the proxy is never asked, and the upstream
// (unresolvable directly) fails. The environment is read once per
// process by Go's net/http, hence a process per case.
func TestProxyFromEnvironment(t *testing.T) {
	ca := tlstest.NewCA(t, "upstream-ca")
	// It stands for a remote host: the SDK's DNS-rebinding guard for
	// loopback listeners would refuse its name.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return demo.Server("test") }, &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	up := httptest.NewUnstartedServer(h)
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, tlstest.Opts{CN: "upstream.test", DNS: []string{"upstream.test"}}).TLS(t)}}
	up.StartTLS()
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "https://"))

	// A CONNECT proxy that knows upstream.test as the test's upstream.
	var mu sync.Mutex
	var asked []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.Host)
		mu.Unlock()
		if r.Method != http.MethodConnect || r.Host != "upstream.test:"+port {
			http.Error(w, "only CONNECT upstream.test", http.StatusForbidden)
			return
		}
		dst, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		src, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			_ = dst.Close()
			return
		}
		go func() { _, _ = io.Copy(dst, src); _ = dst.Close() }()
		_, _ = io.Copy(src, dst)
		_ = src.Close()
	}))
	t.Cleanup(proxy.Close)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcpgw.yaml")
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  remote:\n    url: https://upstream.test:%s/mcp\n    tls: {ca_file: %s}\n    startup_timeout: 5s\n",
		port, tlstest.Write(t, dir, "ca.pem", ca.PEM))
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remote__add","arguments":{"a":2,"b":3}}}`

	t.Run("HTTPS_PROXY", func(t *testing.T) {
		p := startMCPGWEnv(t, []string{"HTTPS_PROXY=" + proxy.URL, "NO_PROXY=", "no_proxy=", "https_proxy="}, "run", "-c", cfg, "--log-format", "json")
		mcpURL := p.field(t, "serving MCP", "url").(string)
		p.field(t, "upstream ready", "protocol_version")
		resp, _, err := post(mcpURL, "", initialize)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize: %v %v", resp, err)
		}
		session := resp.Header.Get("Mcp-Session-Id")
		_, body, err := post(mcpURL, session, call)
		if err != nil || !strings.Contains(string(body), `{\"sum\":5}`) {
			t.Fatalf("remote__add through the proxy: %s %v", body, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(asked) == 0 || asked[0] != "CONNECT upstream.test:"+port {
			t.Errorf("the proxy was asked %v, want CONNECT upstream.test:%s", asked, port)
		}
	})

	t.Run("NO_PROXY", func(t *testing.T) {
		mu.Lock()
		asked = nil
		mu.Unlock()
		p := startMCPGWEnv(t, []string{"HTTPS_PROXY=" + proxy.URL, "NO_PROXY=upstream.test", "no_proxy=", "https_proxy="}, "run", "-c", cfg, "--log-format", "json")
		p.field(t, "serving MCP", "url")
		// The upstream is dialled directly, where upstream.test does not
		// resolve: its first attempt fails, and the proxy saw nothing.
		deadline := time.Now().Add(30 * time.Second)
		for !p.logged("upstream.test") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
		}
		if !p.logged("upstream.test") {
			t.Fatal("no log line names the failed direct connection to upstream.test")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(asked) != 0 {
			t.Errorf("the proxy was asked %v although NO_PROXY names the upstream", asked)
		}
	})
}

// logged reports whether any log line so far contains s.
func (p *proc) logged(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.raw {
		if strings.Contains(l, s) && (strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") || strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`)) {
			return true
		}
	}
	return false
}
