package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

// driverKey is the driver's downstream API key: per-user authorization
// needs an authenticated caller (each principal has its own upstream
// token).
const driverKey = "conformance-driver-key-0123456789"

// metadataDocumentURL is the client ID metadata document URL the suite's
// auth/basic-cimd scenario expects a client to present.
const metadataDocumentURL = "https://conformance-test.local/client-metadata.json"

// perUser is what the per-user mode adds to a run: the gateway's own
// address (public_url must be known before it starts: the redirect URI is
// built on it) and the session key ring.
type perUser struct {
	addr      string // 127.0.0.1:PORT, free when chosen
	keyFile   string
	tokenFile string // the run's own token store (never the user's state directory)
}

// newPerUser picks a free loopback port and writes a key ring into dir.
func newPerUser(dir string) (*perUser, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	kf := filepath.Join(dir, "keys")
	// 32 bytes, base64: a fixed test key (the run's tokens die with it).
	if err := os.WriteFile(kf, []byte("Y29uZm9ybWFuY2UtZHJpdmVyLWtleS0wMTIzNDU2Nzg=\n"), 0o600); err != nil {
		return nil, err
	}
	return &perUser{addr: addr, keyFile: kf, tokenFile: filepath.Join(dir, "tokens.json")}, nil
}

// globals is the top of the gateway config in per-user mode.
func (p *perUser) globals() string {
	// With authentication on, policy denies by default; the driver is the
	// only caller and may use everything.
	return fmt.Sprintf("listen: %s\npublic_url: http://%s\nauth:\n  api_keys:\n    - name: driver\n      key: %q\nsessions:\n  key_file: %q\npolicy:\n  default: allow\n", p.addr, p.addr, driverKey, p.keyFile)
}

// upstreamAuth is the upstream's auth.per_user section, as an operator
// would write it for that server: the scenario's pre-registered client
// with its issuer pinned when it gives one; the client ID metadata
// document for the scenario whose server is known to take one
// (auth/basic-cimd); else the authorization server the upstream's
// metadata names, registered with dynamically.
func (sc scenario) upstreamAuth() string {
	var b strings.Builder
	// The suite's servers are on loopback, which URLs an upstream names
	// may reach only when allowed.
	fmt.Fprintf(&b, "    auth:\n      per_user:\n        store: {file: %q}\n        allow_addresses: [127.0.0.0/8, \"::1\"]\n", sc.pu.tokenFile)
	switch {
	case sc.ctx.ClientID != "":
		fmt.Fprintf(&b, "        client_id: %q\n        client_secret: %q\n        issuer: %q\n", sc.ctx.ClientID, sc.ctx.ClientSecret, sc.ctx.Issuer)
	case sc.name == "auth/basic-cimd":
		fmt.Fprintf(&b, "        discover: true\n        client_metadata_url: %q\n", metadataDocumentURL)
	default:
		b.WriteString("        discover: true\n        dynamic_registration: true\n")
	}
	if strings.HasPrefix(sc.name, "auth/dpop") {
		// The scenario's servers check DPoP-bound tokens (RFC 9449).
		b.WriteString("        dpop: true\n")
	}
	return b.String()
}

// browser follows an authorization link as the user's browser: the
// gateway's start page, the authorization server (which consents at
// once in the suite), the gateway's callback; cookies kept across them.
func browser(logf func(string, ...any)) func(ctx context.Context, link string) error {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	return func(ctx context.Context, link string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		logf("authorization ended at %s: HTTP %d", resp.Request.URL.Redacted(), resp.StatusCode)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the authorization ended at %s with HTTP %d: %s", resp.Request.URL.Redacted(), resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// answerURL answers a URL-mode elicitation/create (the gateway sending the
// link on the caller's session, or in an input_required round) by
// following the link, and everything else with next.
func answerURL(ctx context.Context, follow func(context.Context, string) error, next func(string, json.RawMessage) (json.RawMessage, error)) func(string, json.RawMessage) (json.RawMessage, error) {
	return func(method string, params json.RawMessage) (json.RawMessage, error) {
		var p struct {
			Mode string `json:"mode"`
			URL  string `json:"url"`
		}
		if method != mcp.MethodElicitationCreate || json.Unmarshal(params, &p) != nil || p.Mode != "url" {
			return next(method, params)
		}
		if err := follow(ctx, p.URL); err != nil {
			return json.RawMessage(`{"action":"cancel"}`), nil
		}
		return json.RawMessage(`{"action":"accept"}`), nil
	}
}
