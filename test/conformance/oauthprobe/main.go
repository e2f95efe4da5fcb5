// Command oauthprobe is a plain MCP client that authorizes with
// internal/credentials/oauthclient, to prove that library against the
// official conformance suite's auth/* client scenarios before the gateway's
// per-user flow exists:
//
//	conformance client --command "oauthprobe" --scenario auth/metadata-default
//
// The suite runs it with the scenario server's URL as its last argument and
// the scenario in the environment (MCP_CONFORMANCE_SCENARIO,
// MCP_CONFORMANCE_PROTOCOL_VERSION, MCP_CONFORMANCE_CONTEXT with
// pre-registered credentials for some). The probe lists the server's tools
// and calls each; a 401 or 403 insufficient_scope starts an authorization
// (oauthclient.Begin), whose authorization request it follows with an HTTP
// client that stops at the redirect to its own redirect URI and hands that
// response's query to oauthclient.Complete; the request is then sent again
// with the token. At most maxAuthorizations authorizations are made per
// request.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/sse"
)

const (
	// redirectURI is the probe's registered redirect URI. Nothing listens
	// there: the probe reads the authorization response from the
	// redirect itself.
	redirectURI = "http://127.0.0.1:8976/oauth/callback"
	// metadataDocumentURL is the client ID metadata document URL the suite's
	// auth/basic-cimd scenario expects a client to present.
	metadataDocumentURL = "https://conformance-test.local/client-metadata.json"
	// maxAuthorizations bounds the authorizations one request may cause
	// (the suite's auth/scope-retry-limit allows 3).
	maxAuthorizations = 3
	maxRedirects      = 10
)

type scenarioContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	Issuer       string `json:"issuer"`
	// The identity scenarios' (identity.go).
	PrivateKeyPEM    string `json:"private_key_pem"`
	ValidJWT         string `json:"valid_jwt"`
	IDPIDToken       string `json:"idp_id_token"`
	IDPClientID      string `json:"idp_client_id"`
	IDPTokenEndpoint string `json:"idp_token_endpoint"`
}

func main() {
	verbose := flag.Bool("v", false, "log the library's debug output")
	flag.Parse()
	logger := log.New(os.Stderr, "oauthprobe: ", log.Lmicroseconds)
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: oauthprobe [-v] URL (the conformance suite appends URL)")
		os.Exit(2)
	}
	version := os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION")
	if version == "" {
		version = string(mcp.Version20251125)
	}
	var sc scenarioContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			logger.Fatalf("MCP_CONFORMANCE_CONTEXT is not the JSON object expected: %v", err)
		}
	}
	zl := zap.NewNop()
	if *verbose {
		zl, _ = zap.NewDevelopment()
	}
	cfg := oauthclient.Config{
		Name: "conformance", ClientName: "mcpgw-oauthprobe", ApplicationType: "native",
		MetadataDocumentURL: metadataDocumentURL, Offline: true,
	}
	if sc.ClientID != "" {
		cfg.Preregistered = map[string]oauthclient.Credentials{sc.Issuer: {ClientID: sc.ClientID, ClientSecret: sc.ClientSecret}}
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var dpop *oauthclient.DPoPKey
	if strings.HasPrefix(scenario, "auth/dpop") {
		k, err := oauthclient.NewDPoPKey(nil)
		if err != nil {
			logger.Fatal(err)
		}
		cfg.DPoP, dpop = k, k
	}
	hc := &http.Client{Timeout: 20 * time.Second}
	p := &probe{
		url: flag.Arg(0), version: version, hc: hc, log: logger, sc: sc, scenario: scenario, dpop: dpop,
		oc: oauthclient.New(cfg, hc, zl),
		browser: &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	if err := p.run(ctx); err != nil {
		logger.Printf("scenario %s: %v", os.Getenv("MCP_CONFORMANCE_SCENARIO"), err)
		os.Exit(1)
	}
}

type probe struct {
	url, version string
	hc, browser  *http.Client
	oc           *oauthclient.Client
	log          *log.Logger
	token        *oauthclient.Token
	session      string
	nextID       int
	sc           scenarioContext
	scenario     string
	dpop         *oauthclient.DPoPKey // auth/dpop*: tokens bound to it
}

func (p *probe) stateless() bool { return p.version == string(mcp.Version20260728) }

func (p *probe) run(ctx context.Context) error {
	if !p.stateless() {
		if _, err := p.call(ctx, mcp.MethodInitialize, map[string]any{
			"protocolVersion": p.version, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "mcpgw-oauthprobe", "version": "0.0.0"},
		}); err != nil {
			return err
		}
		if err := p.notify(ctx, "notifications/initialized"); err != nil {
			return err
		}
	}
	res, err := p.call(ctx, mcp.MethodToolsList, map[string]any{})
	if err != nil {
		return err
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		return fmt.Errorf("tools/list: %v", err)
	}
	for _, t := range list.Tools {
		if _, err := p.call(ctx, mcp.MethodToolsCall, map[string]any{"name": t.Name, "arguments": map[string]any{}}); err != nil {
			return err
		}
	}
	p.log.Printf("done: %d tools called", len(list.Tools))
	return nil
}

// call sends one request, authorizing when the server challenges it, and
// returns its result.
func (p *probe) call(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	if p.stateless() {
		params["_meta"] = map[string]any{
			mcp.MetaProtocolVersion:    p.version,
			mcp.MetaClientInfo:         map[string]any{"name": "mcpgw-oauthprobe", "version": "0.0.0"},
			mcp.MetaClientCapabilities: map[string]any{},
		}
	}
	p.nextID++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.nextID, "method": method, "params": params})
	for n := 0; ; n++ {
		resp, err := p.post(ctx, method, body)
		if err != nil {
			return nil, err
		}
		if p.token != nil && p.nonceRetry(resp) {
			drain(resp)
			if resp, err = p.post(ctx, method, body); err != nil {
				return nil, err
			}
		}
		ch := oauthclient.ParseChallenge(resp.Header.Values("WWW-Authenticate"))
		if resp.StatusCode == http.StatusUnauthorized || (resp.StatusCode == http.StatusForbidden && ch.InsufficientScope()) {
			drain(resp)
			if n == maxAuthorizations {
				return nil, fmt.Errorf("%s: still HTTP %d after %d authorizations", method, resp.StatusCode, n)
			}
			p.log.Printf("%s: HTTP %d (%s); authorizing", method, resp.StatusCode, strings.Join(resp.Header.Values("WWW-Authenticate"), "; "))
			if err := p.authorize(ctx, resp.Header.Values("WWW-Authenticate")); err != nil {
				return nil, fmt.Errorf("%s: %w", method, err)
			}
			continue
		}
		return p.result(method, resp)
	}
}

func (p *probe) notify(ctx context.Context, method string) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	resp, err := p.post(ctx, method, body)
	if err != nil {
		return err
	}
	drain(resp)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	return nil
}

func (p *probe) post(ctx context.Context, method string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if p.session != "" {
		req.Header.Set(mcp.HeaderSessionID, p.session)
	}
	if method != mcp.MethodInitialize {
		req.Header.Set(mcp.HeaderProtocolVersion, p.version)
	}
	if p.stateless() {
		req.Header.Set(mcp.HeaderMethod, method)
	}
	if p.token != nil {
		if err := p.present(req); err != nil {
			return nil, err
		}
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", method, err)
	}
	if sid := resp.Header.Get(mcp.HeaderSessionID); sid != "" {
		p.session = sid
	}
	return resp, nil
}

// result reads a JSON-RPC answer from a JSON body or an event stream.
func (p *probe) result(method string, resp *http.Response) (json.RawMessage, error) {
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, bytes.TrimSpace(b))
	}
	var data []byte
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == mcp.ContentTypeEventStream {
		rd := sse.NewReader(resp.Body, 1<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				return nil, fmt.Errorf("%s: event stream ended without an answer: %v", method, err)
			}
			if bytes.Contains(ev.Data, []byte(`"result"`)) || bytes.Contains(ev.Data, []byte(`"error"`)) {
				data = ev.Data
				break
			}
		}
	} else {
		var err error
		if data, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
			return nil, fmt.Errorf("%s: %v", method, err)
		}
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: answer is not JSON-RPC: %v", method, err)
	}
	if m.Error != nil {
		return nil, fmt.Errorf("%s: error %d: %s", method, m.Error.Code, m.Error.Message)
	}
	return m.Result, nil
}

// authorize runs one authorization for the challenge: Begin, the user
// agent's trip through the authorization endpoint up to the redirect to
// redirectURI, Complete.
func (p *probe) authorize(ctx context.Context, challenge []string) error {
	if p.sc.directGrant(p.scenario) {
		return p.grant(ctx, challenge)
	}
	var previous []string
	if p.token != nil {
		previous = p.token.Grant.Scopes
		// A token it was given was refused: discover anew, as the
		// gateway's per-user source does (the server may have moved).
		p.oc.ForgetDiscoveries()
	}
	flow, err := p.oc.Begin(ctx, oauthclient.Request{UpstreamURL: p.url, Challenge: challenge, RedirectURI: redirectURI, Previous: previous})
	if err != nil {
		return err
	}
	query, err := p.follow(ctx, flow.AuthURL)
	if err != nil {
		return err
	}
	tok, err := p.oc.Complete(ctx, flow, query)
	if err != nil {
		return err
	}
	p.log.Printf("authorized at %s for %q (scopes %q)", tok.Grant.Issuer, tok.Grant.Resource, tok.Scopes)
	p.token = tok
	return nil
}

// follow is the user agent: it GETs the authorization URL and follows
// redirects until one goes to redirectURI, whose query it returns.
func (p *probe) follow(ctx context.Context, at string) (url.Values, error) {
	cb, _ := url.Parse(redirectURI)
	for range maxRedirects {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, at, nil)
		if err != nil {
			return nil, err
		}
		resp, err := p.browser.Do(req)
		if err != nil {
			return nil, fmt.Errorf("authorization request: %v", err)
		}
		drain(resp)
		loc, err := resp.Location()
		if resp.StatusCode/100 != 3 || err != nil {
			return nil, fmt.Errorf("authorization request to %s: HTTP %d without a redirect", at, resp.StatusCode)
		}
		if loc.Scheme == cb.Scheme && loc.Host == cb.Host && loc.Path == cb.Path {
			return loc.Query(), nil
		}
		at = loc.String()
	}
	return nil, errors.New("authorization request: too many redirects")
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}
