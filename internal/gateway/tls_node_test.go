package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/tlsconf/tlstest"
)

// tlsNodeClient returns node and test/interop/tls-client.mjs, or skips
// the test without node or the SDK packages (npm ci in test/interop),
// unless MCPGW_REQUIRE_NPM is set (.ci/run sets it).
func tlsNodeClient(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	interop, _ := filepath.Abs(filepath.Join("..", "..", "test", "interop"))
	if err == nil {
		_, err = os.Stat(filepath.Join(interop, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("MCPGW_REQUIRE_NPM") != "" {
			t.Fatalf("node and the TypeScript SDK are needed and MCPGW_REQUIRE_NPM is set: %v (run npm ci in test/interop)", err)
		}
		t.Skipf("node or the TypeScript SDK not available (%v); npm ci in test/interop installs it", err)
	}
	return node, filepath.Join(interop, "tls-client.mjs")
}

// tlsNodeResult is what tls-client.mjs prints.
type tlsNodeResult struct {
	Tools   []string `json:"tools"`
	Echo    string   `json:"echo"`
	IsError bool     `json:"isError"`
	Error   string   `json:"error"`
}

// Issue 31: the official TypeScript SDK clients (v1 and v2) reach the
// gateway over https presenting their own client certificate, which is
// their principal: alice lists and calls the TLS upstream; bob's
// certificate is a principal the policy does not allow; a certificate of
// an unknown CA and an expired one are refused in the handshake, with the
// TLS alert's reason in the client's error.
func TestTLSTypeScriptClients(t *testing.T) {
	t.Parallel()
	node, script := tlsNodeClient(t)
	s := newTLSSetup(t)
	s.start(t)
	dir := t.TempDir()
	ca := tlstest.Write(t, dir, "listener-ca.pem", s.serverCA.PEM)
	leafFiles := func(name string, leaf *tlstest.Leaf) (string, string) {
		return tlstest.Write(t, dir, name+".crt", leaf.CertPEM), tlstest.Write(t, dir, name+".key", leaf.KeyPEM)
	}
	run := func(t *testing.T, sdk, cert, key string) tlsNodeResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, script)
		cmd.Dir = filepath.Dir(script)
		cmd.Env = append(os.Environ(), "MCPGW_URL="+s.base+"/mcp", "MCPGW_CA="+ca, "MCPGW_CERT="+cert, "MCPGW_KEY="+key, "MCPGW_SDK="+sdk, "MCPGW_TOOL=secure__echo")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tls-client.mjs (%s): %v\n%s", sdk, err, stderr.String())
		}
		// The SDK may print warnings first; the script's result is the last line.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var r tlsNodeResult
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			t.Fatalf("tls-client.mjs (%s) printed %q: %v\n%s", sdk, out, err, stderr.String())
		}
		return r
	}
	aliceCert, aliceKey := leafFiles("alice", s.clientCA.Client(t, "alice"))
	bobCert, bobKey := leafFiles("bob", s.clientCA.Client(t, "bob"))
	otherCert, otherKey := leafFiles("other", tlstest.NewCA(t, "other").Client(t, "alice"))
	expiredCert, expiredKey := leafFiles("expired", s.clientCA.Issue(t, tlstest.Opts{CN: "alice", Client: true, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}))

	for _, sdk := range []string{"v1", "v2"} {
		t.Run(sdk, func(t *testing.T) {
			r := run(t, sdk, aliceCert, aliceKey)
			if r.Error != "" || r.IsError {
				t.Fatalf("alice: %+v", r)
			}
			if !slices.Contains(r.Tools, "secure__echo") || r.Echo != "secure:over-tls" {
				t.Errorf("alice: tools %v, echo %q; want secure__echo listed and %q", r.Tools, r.Echo, "secure:over-tls")
			}
			if cn, _ := s.upstreamCN.Load().(string); cn != "mcpgw-1" {
				t.Errorf("the upstream saw client certificate %q, want the gateway's (mcpgw-1)", cn)
			}

			// bob is authenticated but the policy allows secure__* only to
			// alice: the tool is not his to see or call.
			r = run(t, sdk, bobCert, bobKey)
			if slices.Contains(r.Tools, "secure__echo") || (r.Error == "" && !r.IsError) {
				t.Errorf("bob: %+v; want secure__echo neither listed nor served", r)
			}

			for _, c := range []struct{ name, cert, key, want string }{
				{"unknown CA", otherCert, otherKey, "unknown ca"}, // OpenSSL: "tlsv1 alert unknown ca"
				{"expired", expiredCert, expiredKey, "expired"},
			} {
				r := run(t, sdk, c.cert, c.key)
				if r.Error == "" {
					t.Errorf("%s: served: %+v", c.name, r)
				} else if !strings.Contains(strings.ToLower(r.Error), c.want) {
					t.Errorf("%s: error %q; want it to name %q", c.name, r.Error, c.want)
				}
			}
		})
	}
}
