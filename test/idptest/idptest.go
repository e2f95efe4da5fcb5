// Package idptest starts test/idp, a real OAuth 2.1 / OpenID Connect
// provider (zitadel/oidc's example OP), on loopback for a test, and drives
// it the way a user and a resource server would: the authorization code
// flow with PKCE through its login form, JWT verification against its
// JWKS, and its count of token endpoint requests.
//
// The OP binary is MCPGW_IDP_BIN when set (.ci/run builds it with
// test/idp/build.sh), else built from test/idp into the temp directory.
// Where it cannot be had, tests skip, unless MCPGW_REQUIRE_IDP=1 (set by
// .ci/run), where they fail.
package idptest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Config is test/idp's JSON config (see test/idp/config.go).
type Config struct {
	Users               []User   `json:"users"`
	Clients             []Client `json:"clients"`
	AccessTokenLifetime string   `json:"access_token_lifetime,omitempty"`
	// Discovery is "oidc" (default: only the OpenID document) or "both"
	// (also RFC 8414's).
	Discovery string `json:"discovery,omitempty"`
	// RejectResource: authorization requests carrying resource are
	// answered error=invalid_target, as Entra ID does.
	RejectResource bool `json:"reject_resource,omitempty"`
	// RememberConsent: a browser stays signed in at the OP and a client
	// its user approved once is approved again without a form, unless
	// the request asks prompt=login or prompt=consent.
	RememberConsent bool `json:"remember_consent,omitempty"`
}

// User can sign in at the OP's login form; ID is the tokens' sub.
type User struct {
	ID             string `json:"id"`
	Username       string `json:"username"`
	Password       string `json:"password"`
	Email          string `json:"email,omitempty"`
	MayBeExchanged bool   `json:"may_be_exchanged,omitempty"`
}

// Client is a registered OAuth client: Type "native" (public, PKCE) or
// "web" (confidential, client_secret_basic, may exchange tokens).
type Client struct {
	ID                string   `json:"id"`
	Type              string   `json:"type"`
	Secret            string   `json:"secret,omitempty"`
	RedirectURIs      []string `json:"redirect_uris,omitempty"`
	ClientCredentials bool     `json:"client_credentials,omitempty"`
}

// IdP is a running OP.
type IdP struct {
	// Issuer is http://127.0.0.1:PORT/ (with the trailing slash the OP
	// puts in its tokens' iss).
	Issuer string
	// HTTP is the client tests use to talk to it.
	HTTP *http.Client
}

// TokenURL is the OP's token endpoint.
func (p *IdP) TokenURL() string { return p.Issuer + "oauth/token" }

// Binary returns the OP binary, building it when MCPGW_IDP_BIN is unset;
// it skips the test when neither works, unless MCPGW_REQUIRE_IDP=1.
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("MCPGW_IDP_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("MCPGW_IDP_BIN=%s: %v (build it with test/idp/build.sh)", bin, err)
		}
		return bin
	}
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "idp")
	out := filepath.Join(os.TempDir(), fmt.Sprintf("mcpgw-test-idp-%d", os.Getuid()), "idp")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = src
	if msg, err := cmd.CombinedOutput(); err != nil {
		unavailable(t, fmt.Sprintf("building the test OP in %s failed (%v): %s; set MCPGW_IDP_BIN to a binary built by test/idp/build.sh", src, err, msg))
	}
	return out
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("MCPGW_REQUIRE_IDP") == "1" {
		t.Fatal(why)
	}
	t.Skip("test OP unavailable (.ci/run requires it): " + why)
}

// Start runs the OP with cfg until the test ends.
func Start(t testing.TB, cfg Config) *IdP {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "idp.json")
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-config", path, "-exit-on-eof")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the test OP %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = stdin.Close() // -exit-on-eof: it shuts down
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			var line struct{ Issuer string }
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				ready <- line.Issuer
			}
		}
		close(ready)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case issuer, ok := <-ready:
		if !ok || issuer == "" {
			t.Fatal("the test OP exited before it served (its log is above)")
		}
		return &IdP{Issuer: issuer, HTTP: &http.Client{Timeout: 10 * time.Second}}
	case <-time.After(30 * time.Second):
		t.Fatal("the test OP did not print its issuer within 30s")
	}
	return nil
}

// testWriter sends the OP's log to the test log, where a failure shows it.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("idp: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var (
	hiddenID   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	loginError = regexp.MustCompile(`(?s)<p style="color:red[^"]*">(.*?)</p>`)
)

// Login runs the authorization code flow with PKCE for a public client as
// the user would in a browser: the OP's authorize endpoint, its login form
// filled with username and password, the redirect back to redirectURI
// (not followed: its code is read off the Location), and the code's
// exchange. It returns the token response.
func (p *IdP) Login(ctx context.Context, clientID, redirectURI, username, password string, scopes ...string) (*oauth2.Token, error) {
	conf := &oauth2.Config{
		ClientID:    clientID,
		RedirectURL: redirectURI,
		Scopes:      scopes,
		Endpoint: oauth2.Endpoint{
			AuthURL: p.Issuer + "auth", TokenURL: p.TokenURL(), AuthStyle: oauth2.AuthStyleInParams,
		},
	}
	verifier := oauth2.GenerateVerifier()
	state := randomString()
	var landed *url.URL
	browser := &http.Client{
		Timeout: 10 * time.Second,
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), redirectURI) {
				landed = req.URL
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	page, err := get(ctx, browser, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		return nil, fmt.Errorf("authorize: %w", err)
	}
	m := hiddenID.FindStringSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("authorize: no login form in the OP's answer: %.300s", page)
	}
	form := url.Values{"id": {m[1]}, "username": {username}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"login/username", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := browser.Do(req)
	if err != nil {
		return nil, fmt.Errorf("login form: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	if landed == nil {
		if m := loginError.FindSubmatch(body); m != nil {
			return nil, fmt.Errorf("login as %q: the OP's form says %q", username, strings.TrimSpace(string(m[1])))
		}
		return nil, fmt.Errorf("login as %q did not come back to %s (status %d): %.300s", username, redirectURI, resp.StatusCode, body)
	}
	q := landed.Query()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("authorize: %s: %s", e, q.Get("error_description"))
	}
	if q.Get("state") != state {
		return nil, errors.New("authorize: the OP returned another state")
	}
	return conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, p.HTTP), q.Get("code"), oauth2.VerifierOption(verifier))
}

func get(ctx context.Context, c *http.Client, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %.300s", u, resp.Status, body)
	}
	return string(body), err
}

func randomString() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Claims are what a resource server reads off a verified access token.
type Claims struct {
	Subject  string         `json:"sub"`
	Audience []string       `json:"aud"`
	Scope    string         `json:"scope"`
	ClientID string         `json:"client_id"`
	Act      map[string]any `json:"act"`
}

// Verify checks a JWT access token as a resource server whose identifier
// is audience would: signature against the OP's JWKS, iss, exp, and that
// aud contains audience.
func (p *IdP) Verify(ctx context.Context, token, audience string) (Claims, error) {
	ctx = oidc.ClientContext(ctx, p.HTTP)
	provider, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		return Claims{}, err
	}
	// Access tokens carry no nonce or azp rules of ID tokens; go-oidc's
	// checks of iss, aud, exp and the signature are the ones that apply.
	tok, err := provider.Verifier(&oidc.Config{ClientID: audience}).Verify(ctx, token)
	if err != nil {
		return Claims{}, err
	}
	var c Claims
	err = tok.Claims(&c)
	return c, err
}

// TokenRequests returns how many token endpoint requests the OP has
// answered, by grant_type.
func (p *IdP) TokenRequests(t testing.TB) map[string]int {
	t.Helper()
	body, err := get(context.Background(), p.HTTP, p.Issuer+"test/stats")
	if err != nil {
		t.Fatal(err)
	}
	var stats struct {
		TokenRequests map[string]int `json:"token_requests"`
	}
	if err := json.Unmarshal([]byte(body), &stats); err != nil {
		t.Fatal(err)
	}
	return stats.TokenRequests
}

// GrantTokenExchange is RFC 8693's grant_type, as TokenRequests counts it.
const GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
