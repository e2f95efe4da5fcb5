package edge_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/auth/authtest"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// dpopTransport is a Go DPoP client's: every request presents the token
// with a fresh proof of key, and a use_dpop_nonce refusal is retried once.
type dpopTransport struct {
	key   *oauthclient.DPoPKey
	token string
	base  http.RoundTripper
}

func (d dpopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	send := func() (*http.Response, error) {
		c := r.Clone(r.Context())
		if r.GetBody != nil {
			c.Body, _ = r.GetBody()
		}
		proof, err := d.key.Proof(c.Method, c.URL.String(), d.token)
		if err != nil {
			return nil, err
		}
		c.Header.Set("Authorization", "DPoP "+d.token)
		c.Header.Set("DPoP", proof)
		return d.base.RoundTrip(c)
	}
	resp, err := send()
	if err == nil && d.key.SetNonce(r.URL.String(), resp.Header.Get("DPoP-Nonce")) && resp.StatusCode == http.StatusUnauthorized {
		resp.Body.Close()
		return send()
	}
	return resp, err
}

// TestDPoPProtectedRoute: on a route with require_dpop an official-SDK
// client presenting a DPoP-bound token with proofs works end to end
// (nonces too); a bearer token, the bound token as Bearer, a replayed
// proof and a proof for another method are refused with a DPoP
// challenge; neither token nor proof reaches the log.
func TestDPoPProtectedRoute(t *testing.T) {
	t.Parallel()
	is := authtest.NewIssuer(t)
	srv := gatewaytest.SDKServer("rec", 10)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	cfg, err := config.Parse("dpop.yaml", []byte(fmt.Sprintf(`
listen: %s
public_url: %s
upstreams:
  rec: {url: %s/mcp}
routes:
  - {path: /mcp, require_dpop: true}
auth:
  oidc: {issuer: %q}
  dpop: {nonce: true}
policy: {default: allow}
`, ln.Addr(), base, ts.URL, is.URL)), nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &gatewaytest.SyncBuffer{}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logs), zapcore.DebugLevel)
	gatewaytest.RunGateway(t, cfg, gateway.Options{Logger: zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core())), Listener: ln, Auth: auth.Options{KeyRefreshInterval: time.Millisecond}})

	mcpURL := base + "/mcp"
	key, err := oauthclient.NewDPoPKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := is.Claims("alice", mcpURL)
	c["cnf"] = map[string]any{"jkt": key.Thumbprint()}
	bound := is.Token(c)
	unbound := is.Token(is.Claims("bob", mcpURL))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "dpop-client", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: mcpURL, MaxRetries: -1, HTTPClient: &http.Client{Transport: dpopTransport{key, bound, tr}}}, nil)
	if err != nil {
		t.Fatalf("DPoP client: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := gatewaytest.Echo(t, cs, "echo"); got != "rec:hi" {
		t.Errorf("echo through the DPoP route = %q", got)
	}

	proof, err := key.Proof(http.MethodPost, mcpURL, bound)
	if err != nil {
		t.Fatal(err)
	}
	getProof, _ := key.Proof(http.MethodGet, mcpURL, bound)
	raw := &gatewaytest.RawClient{T: t, URL: mcpURL}
	for _, tc := range []struct {
		name        string
		authz, dpop string
		want        string
	}{
		{"bearer token", "Bearer " + unbound, "", `DPoP algs="ES256 ES384 ES512 RS256 PS256 EdDSA", resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
		{"bound token as Bearer", "Bearer " + bound, "", `error="invalid_token", error_description="the token is DPoP-bound`},
		{"proof for another method", "DPoP " + bound, getProof, `error="invalid_dpop_proof", error_description="the DPoP proof is for method`},
		{"token without its proof", "DPoP " + bound, "", `error="invalid_dpop_proof"`},
	} {
		r := raw.Do(http.MethodPost, gatewaytest.InitBody, func(req *http.Request) {
			req.Header.Set("Authorization", tc.authz)
			if tc.dpop != "" {
				req.Header.Set("DPoP", tc.dpop)
			}
		})
		ch := r.Header.Values("WWW-Authenticate")
		if r.Status != http.StatusUnauthorized || len(ch) != 1 || !strings.HasPrefix(ch[0], "DPoP ") || !strings.Contains(ch[0], tc.want) {
			t.Errorf("%s: HTTP %d, challenges %q; want 401 with a DPoP challenge containing %q", tc.name, r.Status, ch, tc.want)
		}
	}
	// A proof replayed: the first use (with the gateway's nonce) passes,
	// the second is refused.
	key.SetNonce(mcpURL, key.Nonce(mcpURL))
	proof, _ = key.Proof(http.MethodPost, mcpURL, bound)
	for i, want := range []int{http.StatusOK, http.StatusUnauthorized} {
		r := raw.Do(http.MethodPost, gatewaytest.InitBody, func(req *http.Request) {
			req.Header.Set("Authorization", "DPoP "+bound)
			req.Header.Set("DPoP", proof)
		})
		if r.Status != want || (want == http.StatusUnauthorized && !strings.Contains(r.Header.Get("WWW-Authenticate"), "used before")) {
			t.Errorf("use %d of one proof: HTTP %d %q, want %d", i+1, r.Status, r.Header.Get("WWW-Authenticate"), want)
		}
	}
	for _, secret := range []string{bound, unbound, proof, getProof} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a token or proof is in the log")
		}
	}
}
