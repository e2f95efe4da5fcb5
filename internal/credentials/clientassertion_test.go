package credentials

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
)

// proofClaims verifies a DPoP proof with the key in its own header and
// returns its claims and the key's thumbprint.
func proofClaims(t *testing.T, proof string) (map[string]any, string) {
	t.Helper()
	sig, err := jose.ParseSigned(proof, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Errorf("DPoP proof %q: %v", proof, err)
		return nil, ""
	}
	h := sig.Signatures[0].Protected
	payload, err := sig.Verify(h.JSONWebKey)
	if err != nil || h.ExtraHeaders["typ"] != "dpop+jwt" {
		t.Errorf("DPoP proof does not verify (%v) or typ %v", err, h.ExtraHeaders["typ"])
		return nil, ""
	}
	var c map[string]any
	_ = json.Unmarshal(payload, &c)
	tp, _ := h.JSONWebKey.Thumbprint(crypto.SHA256)
	return c, base64.RawURLEncoding.EncodeToString(tp)
}

func ath(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// TestAssertionFileRotatedUnderRunningGateway: with oauth.assertion_file
// (a workload identity token, the JWT bearer grant) the file is read for
// every token request, so when the platform rotates it and the old
// token's tokens stop being accepted, the next request gets a token from
// the new assertion and no upstream call fails.
func TestAssertionFileRotatedUnderRunningGateway(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("workload-jwt-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	valid := map[string]bool{} // access tokens the upstream accepts now
	assertionOf := map[string]string{}
	n := 0
	expired := "" // the assertion the authorization server refuses now
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") != GrantTypeJWTBearer || r.PostForm.Get("client_id") != "wl" || r.PostForm.Get("client_secret") != "" {
			t.Errorf("token request form %v", r.PostForm)
		}
		if _, _, basic := r.BasicAuth(); basic {
			t.Error("Basic client authentication with a workload assertion")
		}
		mu.Lock()
		defer mu.Unlock()
		if r.PostForm.Get("assertion") == expired {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"the assertion expired"}`)
			return
		}
		n++
		at := fmt.Sprintf("at-%d", n)
		valid[at], assertionOf[at] = true, r.PostForm.Get("assertion")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, at)
	}))
	t.Cleanup(idp.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok := valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(up.Close)
	ctx := t.Context()
	base := &http.Client{}
	hc := sharedClientOf(ctx, "wl", &config.Upstream{URL: up.URL + "/mcp", OAuth: &config.UpstreamOAuth{TokenURL: idp.URL, ClientID: "wl", AssertionFile: file, Resource: up.URL + "/mcp"}}, base)
	call := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, up.URL+"/mcp", strings.NewReader("{}"))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("upstream call failed: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("upstream call answered HTTP %d", resp.StatusCode)
		}
		return resp
	}
	call()
	call()
	// The platform rotates the token; the old one (and what it was
	// exchanged for) stops being accepted.
	if err := os.WriteFile(file, []byte("workload-jwt-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	expired = "workload-jwt-1"
	for at := range valid {
		if assertionOf[at] == "workload-jwt-1" {
			delete(valid, at)
		}
	}
	mu.Unlock()
	call()
	call()
	mu.Lock()
	defer mu.Unlock()
	if n != 2 || assertionOf["at-1"] != "workload-jwt-1" || assertionOf["at-2"] != "workload-jwt-2" {
		t.Errorf("%d token requests with assertions %v; want the second with the rotated token", n, assertionOf)
	}
}

// TestPrivateKeyJWTAndDPoPClientCredentials: oauth.private_key_file
// authenticates with a signed assertion (no secret), and oauth.dpop binds
// the token: a proof on the token request and on each upstream request
// (with ath), "Authorization: DPoP", and the upstream's use_dpop_nonce
// answered with one retry.
func TestPrivateKeyJWTAndDPoPClientCredentials(t *testing.T) {
	keyPath := filepath.Join(t.TempDir(), "key.pem")
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var jkt string
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		sig, err := jose.ParseSigned(r.PostForm.Get("client_assertion"), []jose.SignatureAlgorithm{jose.ES256})
		if err != nil || r.PostForm.Get("client_assertion_type") != oauthclient.ClientAssertionType {
			t.Errorf("client assertion: %v, form %v", err, r.PostForm)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if _, err := sig.Verify(&k.PublicKey); err != nil || sig.Signatures[0].Protected.KeyID != "kid-1" {
			t.Errorf("client assertion does not verify with the file's key: %v", err)
		}
		c, tp := proofClaims(t, r.Header.Get("DPoP"))
		if c["htm"] != "POST" || c["ath"] != nil {
			t.Errorf("token request proof %v", c)
		}
		mu.Lock()
		jkt = tp
		mu.Unlock()
		fmt.Fprint(w, `{"access_token":"bound","token_type":"DPoP","expires_in":3600}`)
	}))
	t.Cleanup(idp.Close)
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, tp := proofClaims(t, r.Header.Get("DPoP"))
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s %v", r.Header.Get("Authorization"), c["nonce"]))
		if tp != jkt || c["ath"] != ath("bound") || c["htm"] != r.Method || !strings.HasSuffix(fmt.Sprint(c["htu"]), "/mcp") {
			t.Errorf("resource request proof %v (thumbprint %s, token bound to %s)", c, tp, jkt)
		}
		w.Header().Set("DPoP-Nonce", "rs-nonce")
		if c["nonce"] != "rs-nonce" {
			w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce", algs="ES256"`)
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(up.Close)
	ctx := t.Context()
	base := &http.Client{}
	hc := sharedClientOf(ctx, "gh", &config.Upstream{URL: up.URL + "/mcp", OAuth: &config.UpstreamOAuth{TokenURL: idp.URL, ClientID: "cid", PrivateKeyFile: keyPath, KeyID: "kid-1", DPoP: true}}, base)
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, up.URL+"/mcp?q=1", strings.NewReader("{}"))
		req.Header.Set("DPoP", "a-downstream-proof") // never goes upstream
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("upstream call: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"DPoP bound <nil>", "DPoP bound rs-nonce", "DPoP bound rs-nonce"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("upstream saw %q, want %q", seen, want)
	}
}

// dpopSource is a per-user source whose tokens are bound to key.
type dpopSource struct {
	key *oauthclient.DPoPKey
}

func (s dpopSource) Kind() Kind { return KindPerUser }
func (s dpopSource) Token(context.Context, Subject) (string, error) {
	return "user-tok", nil
}
func (s dpopSource) Refused(context.Context, Subject, string) {}
func (s dpopSource) DPoPKey() *oauthclient.DPoPKey            { return s.key }

// TestSourceTransportPresentsDPoPBoundTokens: an acting-for connection
// whose source binds its tokens (auth.per_user.dpop) presents them as
// DPoP with a fresh proof per request and answers a nonce challenge once.
func TestSourceTransportPresentsDPoPBoundTokens(t *testing.T) {
	key, err := oauthclient.NewDPoPKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var jtis []any
	refusals := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, tp := proofClaims(t, r.Header.Get("DPoP"))
		mu.Lock()
		defer mu.Unlock()
		jtis = append(jtis, c["jti"])
		if r.Header.Get("Authorization") != "DPoP user-tok" || tp != key.Thumbprint() || c["ath"] != ath("user-tok") {
			t.Errorf("Authorization %q, proof %v", r.Header.Get("Authorization"), c)
		}
		if c["nonce"] != "n1" {
			refusals++
			w.Header().Set("DPoP-Nonce", "n1")
			w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(up.Close)
	tr := &sourceTransport{upstream: "u", origin: originOf(up.URL), src: dpopSource{key}, cell: NewCell(Subject{}), base: http.DefaultTransport}
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, up.URL+"/mcp", strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("RoundTrip: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if refusals != 1 || len(jtis) != 3 || jtis[0] == jtis[1] || jtis[1] == jtis[2] {
		t.Errorf("%d nonce refusals, proofs %v; want one refusal and a fresh jti each time", refusals, jtis)
	}
}
