package credentials_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/test/idptest"
)

// The upstream-identity must-shows for RFC 8693 token exchange, against a
// real OAuth/OIDC provider (test/idp: zitadel/oidc's example OP) and
// official-SDK upstreams that verify every token against the OP's JWKS and
// bind their sessions to the token's user.

// idpGWSecret is the secret of the gateway's client at the OP
// (gatewaytest.IdPGWClient).
const idpGWSecret = "gw-secret-8c1d7e0f42"

// exchangeIdP starts the OP with alice and bob (whose tokens the gateway
// may exchange), carol (who may be exchanged only with an actor token: a
// refusal otherwise), the users' client and the gateway's client.
func exchangeIdP(t *testing.T) *idptest.IdP {
	return idptest.Start(t, idptest.Config{
		Users: []idptest.User{
			{ID: "alice", Username: "alice", Password: "pw-alice", MayBeExchanged: true},
			{ID: "bob", Username: "bob", Password: "pw-bob", MayBeExchanged: true},
			{ID: "carol", Username: "carol", Password: "pw-carol"},
		},
		Clients: []idptest.Client{
			{ID: gatewaytest.IdPAppClient, Type: "native", RedirectURIs: []string{gatewaytest.IdPAppRedirect}},
			{ID: gatewaytest.IdPGWClient, Type: "web", Secret: idpGWSecret, ClientCredentials: true},
		},
	})
}

// seenRequest is what a recording upstream saw of one request.
type seenRequest struct {
	method, authorization string
	sub                   string // "" when the token did not verify
	aud                   []string
	actor                 string // the act claim's sub
	err                   string
	raw                   string // every header, the body and the URL
}

// recordingUpstream is an official-SDK MCP server whose whoami tool says
// whom the request's verified token is for. Every request's Authorization
// is recorded and verified as a resource server would: signature by the
// OP's JWKS, iss, exp, and aud containing audience. The SDK's bearer
// middleware then binds each upstream session to the token's user (a
// session used with another user's token is refused 403).
type recordingUpstream struct {
	url string
	mu  sync.Mutex
	log []seenRequest
}

func newRecordingUpstream(t *testing.T, idp *idptest.IdP, audience string) *recordingUpstream {
	u := &recordingUpstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "recording-" + audience, Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ti := req.Extra.TokenInfo
		who := "nobody"
		if ti != nil {
			who = ti.UserID
			if act, _ := ti.Extra["act"].(string); act != "" {
				who += " via " + act
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
	})
	verify := func(ctx context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		c, err := idp.Verify(ctx, token, audience)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", sdkauth.ErrInvalidToken, err)
		}
		act, _ := c.Act["sub"].(string)
		return &sdkauth.TokenInfo{UserID: c.Subject, Expiration: time.Now().Add(time.Minute), Extra: map[string]any{"act": act}}, nil
	}
	protected := sdkauth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var raw bytes.Buffer
		_ = r.Header.Write(&raw)
		raw.Write(body)
		seen := seenRequest{method: r.Method, authorization: r.Header.Get("Authorization"), raw: raw.String() + r.URL.String()}
		if tok, ok := strings.CutPrefix(seen.authorization, "Bearer "); ok {
			if c, err := idp.Verify(r.Context(), tok, audience); err == nil {
				seen.sub, seen.aud = c.Subject, c.Audience
				seen.actor, _ = c.Act["sub"].(string)
			} else {
				seen.err = err.Error()
			}
		}
		u.mu.Lock()
		u.log = append(u.log, seen)
		u.mu.Unlock()
		protected.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

func (u *recordingUpstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.log)
}

func TestTokenExchangeActsForCaller(t *testing.T) {
	t.Parallel()
	idp := exchangeIdP(t)
	ctx := context.Background()
	login := func(user string) string {
		tok, err := idp.Login(ctx, gatewaytest.IdPAppClient, gatewaytest.IdPAppRedirect, user, "pw-"+user, "openid")
		if err != nil {
			t.Fatalf("%s signs in: %v", user, err)
		}
		return tok.AccessToken
	}
	downstream := map[string]string{"alice": login("alice"), "bob": login("bob"), "carol": login("carol")}

	rec := newRecordingUpstream(t, idp, "upstream-rec")
	deleg := newRecordingUpstream(t, idp, "upstream-deleg")
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	_, base, logs := oauthGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
public_url: http://127.0.0.1
auth:
  oidc: {issuer: %[1]q, audience: %[2]s}
audit: {output: %[7]s}
policy: {default: allow} # these tests are about identity
upstreams:
  rec:
    url: %[3]s
    auth:
      token_exchange:
        issuer: %[1]q
        client_id: %[4]s
        client_secret: %[5]s
        audience: upstream-rec
  deleg:
    url: %[6]s
    auth:
      token_exchange:
        token_url: %[1]soauth/token
        client_id: %[4]s
        client_secret: %[5]s
        audience: upstream-deleg
        actor: true
`, idp.Issuer, gatewaytest.IdPAppClient, rec.url, gatewaytest.IdPGWClient, idpGWSecret, deleg.url, auditPath))

	exchanges := func() int { return idp.TokenRequests(t)[idptest.GrantTokenExchange] }
	sessions := map[string]*mcp.ClientSession{}
	for _, user := range []string{"alice", "bob", "carol"} {
		cs, err := gatewaytest.ConnectWith(t, base+"/mcp", downstream[user], "")
		if err != nil {
			t.Fatalf("%s connects: %v", user, err)
		}
		sessions[user] = cs
	}

	t.Run("alice's calls reach the upstream as alice, with one exchange for 20 calls", func(t *testing.T) {
		before := exchanges()
		for i := range 20 {
			got, err := gatewaytest.Whoami(t, sessions["alice"], "rec__whoami")
			if err != nil || got != "alice" {
				t.Fatalf("call %d: whoami = %q, %v; want alice", i, got, err)
			}
		}
		if n := exchanges() - before; n != 1 {
			t.Errorf("%d exchanges at the OP for alice's 20 calls, want 1 (cached)", n)
		}
	})

	t.Run("bob's reach it as bob, interleaved with alice's, nothing crossed", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan string, 40)
		for i := range 20 {
			user := []string{"alice", "bob"}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := gatewaytest.Whoami(t, sessions[user], "rec__whoami"); err != nil || got != user {
					errs <- fmt.Sprintf("%s's call answered %q, %v", user, got, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})

	t.Run("stateless 2026-07-28 calls act for their caller too", func(t *testing.T) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__whoami","arguments":{},` + meta + `}}`
		before := exchanges()
		for _, user := range []string{"bob", "alice", "bob"} {
			h := gatewaytest.Bearer(downstream[user])
			h.Set("Mcp-Protocol-Version", "2026-07-28")
			h.Set("Mcp-Method", "tools/call")
			h.Set("Mcp-Name", "rec__whoami")
			r := (&gatewaytest.RawClient{T: t, URL: base + "/mcp", Header: h}).Post(body)
			if m := r.Last(t); r.Status != http.StatusOK || m.Error != nil || !strings.Contains(string(m.Result), `"text":"`+user+`"`) {
				t.Errorf("%s's stateless call: HTTP %d %s", user, r.Status, r.Body)
			}
		}
		if n := exchanges() - before; n != 0 {
			t.Errorf("%d exchanges for stateless calls of principals whose tokens are cached, want 0", n)
		}
	})

	t.Run("a refusal by the IdP is a clear error naming the upstream and the IdP's error", func(t *testing.T) {
		_, err := gatewaytest.Whoami(t, sessions["carol"], "rec__whoami")
		if err == nil {
			t.Fatal("carol's call succeeded, but the OP refuses to exchange her token")
		}
		for _, want := range []string{`upstream "rec"`, "token exchange", "invalid_grant", `subject \"carol\" may not be exchanged`} {
			if !strings.Contains(err.Error(), want) && !strings.Contains(err.Error(), strings.ReplaceAll(want, `\"`, `"`)) {
				t.Errorf("carol's error %q lacks %q", err, want)
			}
		}
		if strings.Contains(err.Error(), downstream["carol"]) || strings.Contains(err.Error(), idpGWSecret) {
			t.Error("the error carries a token or the client secret")
		}
	})

	t.Run("with actor, the upstream sees the caller with the gateway as actor", func(t *testing.T) {
		for _, user := range []string{"carol", "alice"} {
			if got, err := gatewaytest.Whoami(t, sessions[user], "deleg__whoami"); err != nil || got != user+" via "+gatewaytest.IdPGWClient {
				t.Errorf("%s via deleg: whoami = %q, %v; want %q", user, got, err, user+" via "+gatewaytest.IdPGWClient)
			}
		}
	})

	// What the upstreams saw: every request carried a token verified for
	// that upstream, for alice, bob or carol, and never a downstream token.
	for name, up := range map[string]*recordingUpstream{"rec": rec, "deleg": deleg} {
		seen := up.requests()
		subs := map[string]int{}
		for _, r := range seen {
			for user, tok := range downstream {
				if strings.Contains(r.raw, tok) {
					t.Errorf("%s saw %s's downstream token (%s request)", name, user, r.method)
				}
			}
			if r.sub == "" {
				t.Errorf("%s: a %s request's token did not verify: %q (%s)", name, r.method, r.err, r.authorization)
				continue
			}
			if !slices.Contains(r.aud, "upstream-"+name) {
				t.Errorf("%s: a token for %s has aud %q", name, r.sub, r.aud)
			}
			if name == "deleg" && r.actor != gatewaytest.IdPGWClient {
				t.Errorf("deleg: a token for %s has actor %q, want %q", r.sub, r.actor, gatewaytest.IdPGWClient)
			}
			subs[r.sub]++
		}
		want := map[string]bool{"rec": true, "deleg": true}
		if !want[name] || (name == "rec" && (subs["alice"] == 0 || subs["bob"] == 0 || subs["carol"] != 0)) {
			t.Errorf("%s saw requests for %v", name, subs)
		}
	}

	// The audit says which credential each call carried, and for whom.
	data, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	var exchanged int
	for _, r := range gatewaytest.AuditRecords(t, auditPath) {
		if r["name"] == "rec__whoami" && r["outcome"] == "ok" {
			p, _ := r["principal"].(map[string]any)
			if r["credential"] != "exchanged" || (p["subject"] != "alice" && p["subject"] != "bob") {
				t.Errorf("audit record %v: want credential exchanged for alice or bob", r)
			}
			exchanged++
		}
	}
	if exchanged != 43 {
		t.Errorf("%d audited rec__whoami calls with a result, want 43", exchanged)
	}
	for user, tok := range downstream {
		if strings.Contains(string(data), tok) || strings.Contains(logs.String(), tok) {
			t.Errorf("%s's downstream token is in the audit log or the process log", user)
		}
	}
	if strings.Contains(logs.String(), idpGWSecret) {
		t.Error("the gateway's client secret was logged")
	}
}
