package oauthclient

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// writeKey writes k as a PKCS #8 PEM file and dates it at mtime (so a
// rewrite within the file system's time granularity still reads as
// changed).
func writeKey(t *testing.T, path string, k crypto.Signer, mtime time.Time) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// verifyJWS checks a compact JWS with key and returns its header and claims.
func verifyJWS(t *testing.T, s string, key any) (jose.Header, map[string]any) {
	t.Helper()
	sig, err := jose.ParseSigned(s, []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.RS256, jose.PS256})
	if err != nil {
		t.Fatalf("not a JWS: %v", err)
	}
	if key == nil { // a DPoP proof: its own jwk
		key = sig.Signatures[0].Protected.JSONWebKey
	}
	payload, err := sig.Verify(key)
	if err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return sig.Signatures[0].Protected, claims
}

// TestClientAssertionFromKeyFile: a private_key_jwt assertion is signed
// by the file's key with an algorithm the server accepts, carries what
// RFC 7523 asks, and a key rotated in the file is used from then on.
func TestClientAssertionFromKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.pem")
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	writeKey(t, path, ec, time.Unix(1000, 0))
	kf := &KeyFile{Path: path, KeyID: "k1"}
	now := time.Unix(1_700_000_000, 0)
	a, err := kf.ClientAssertion("cid", "https://as.example.com", []string{"RS256", "ES256"}, now)
	if err != nil {
		t.Fatal(err)
	}
	h, c := verifyJWS(t, a, &ec.PublicKey)
	if h.Algorithm != "ES256" || h.KeyID != "k1" {
		t.Errorf("header alg %q kid %q, want ES256 k1", h.Algorithm, h.KeyID)
	}
	if c["iss"] != "cid" || c["sub"] != "cid" || c["aud"] != "https://as.example.com" || c["jti"] == "" ||
		c["iat"] != float64(now.Unix()) || c["exp"] != float64(now.Unix()+60) {
		t.Errorf("claims %v", c)
	}
	b, _ := kf.ClientAssertion("cid", "https://as.example.com", nil, now)
	if _, c2 := verifyJWS(t, b, &ec.PublicKey); c2["jti"] == c["jti"] {
		t.Error("two assertions share a jti")
	}

	// Rotated: an RSA key now, and the server's list decides the alg.
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	writeKey(t, path, rk, time.Unix(2000, 0))
	a, err = kf.ClientAssertion("cid", "https://as.example.com", []string{"ES256", "PS256"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := verifyJWS(t, a, &rk.PublicKey); h.Algorithm != "PS256" {
		t.Errorf("after rotation: alg %q, want PS256", h.Algorithm)
	}

	// A server whose algorithms the key cannot make: a clear refusal.
	if _, err := kf.ClientAssertion("cid", "x", []string{"ES256"}, now); err == nil || !strings.Contains(err.Error(), "ES256") {
		t.Errorf("RSA key, server wants ES256 only: %v", err)
	}
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kf.ClientAssertion("cid", "x", nil, now); err == nil || strings.Contains(err.Error(), "not a key") {
		t.Errorf("garbage key file: %v (must fail without echoing the file)", err)
	}
}

// TestPostTokenPrivateKeyJWTAndDPoPNonce: the client assertion goes in
// the form (a fresh one per request sent), the DPoP proof in its header,
// and a use_dpop_nonce refusal is answered once with the server's nonce —
// not again when the server keeps refusing.
func TestPostTokenPrivateKeyJWTAndDPoPNonce(t *testing.T) {
	var mu sync.Mutex
	var forms []url.Values
	var proofs []map[string]any
	nonce := "n-1"
	alwaysRefuse := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		_, c := verifyJWS(t, r.Header.Get("DPoP"), nil)
		mu.Lock()
		forms, proofs = append(forms, r.PostForm), append(proofs, c)
		refuse := alwaysRefuse || c["nonce"] != nonce
		mu.Unlock()
		w.Header().Set("DPoP-Nonce", nonce)
		if refuse {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"use_dpop_nonce"}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"at","token_type":"DPoP","expires_in":60}`)
	}))
	defer srv.Close()
	key, err := NewDPoPKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	p := TokenPost{Endpoint: srv.URL + "/token?x=1", ClientID: "cid", AuthMethod: AuthMethodPrivateKeyJWT, DPoP: key,
		Form:      url.Values{"grant_type": {"client_credentials"}},
		Assertion: func() (string, error) { n++; return fmt.Sprintf("assertion-%d", n), nil }}
	a, err := PostToken(context.Background(), srv.Client(), p)
	if err != nil || a.Status != http.StatusOK || a.TokenType != "DPoP" {
		t.Fatalf("PostToken = %+v, %v", a, err)
	}
	if len(forms) != 2 {
		t.Fatalf("%d requests, want 2 (one retry with the nonce)", len(forms))
	}
	for i, f := range forms {
		if f.Get("client_assertion_type") != ClientAssertionType || f.Get("client_assertion") != fmt.Sprintf("assertion-%d", i+1) || f.Get("client_id") != "cid" {
			t.Errorf("request %d form %v", i, f)
		}
		pr := proofs[i]
		if pr["htm"] != "POST" || pr["htu"] != srv.URL+"/token" || pr["ath"] != nil {
			t.Errorf("request %d proof %v", i, pr)
		}
	}
	if proofs[0]["nonce"] != nil || proofs[1]["nonce"] != nonce || proofs[0]["jti"] == proofs[1]["jti"] {
		t.Errorf("proofs %v", proofs)
	}

	// A server refusing every nonce: one retry only (its nonce changes
	// each time, so the limit is the retry, not the nonce).
	mu.Lock()
	alwaysRefuse, nonce, forms = true, "n-2", nil
	mu.Unlock()
	a, err = PostToken(context.Background(), srv.Client(), p)
	if err != nil || a.Code != "use_dpop_nonce" || len(forms) != 2 {
		t.Errorf("always refused: %+v, %v, %d requests (want the refusal after 2)", a, err, len(forms))
	}
}

// TestDPoPProof: htu without query and fragment, ath the token's hash,
// the public key in the header (never the private part), the thumbprint
// RFC 7638's.
func TestDPoPProof(t *testing.T) {
	key, err := NewDPoPKey(func() time.Time { return time.Unix(1_700_000_000, 0) })
	if err != nil {
		t.Fatal(err)
	}
	proof, err := key.Proof("GET", "https://Up.example.com/mcp?session=1#f", "tok")
	if err != nil {
		t.Fatal(err)
	}
	h, c := verifyJWS(t, proof, nil)
	sum := sha256.Sum256([]byte("tok"))
	if h.ExtraHeaders["typ"] != "dpop+jwt" || c["htm"] != "GET" || c["htu"] != "https://Up.example.com/mcp" ||
		c["ath"] != base64.RawURLEncoding.EncodeToString(sum[:]) || c["iat"] != float64(1_700_000_000) {
		t.Errorf("header %v claims %v", h.ExtraHeaders, c)
	}
	if !h.JSONWebKey.IsPublic() || strings.Contains(string(key.jwkJSON()), `"d"`) {
		t.Error("the proof's jwk has a private part")
	}
	tp, _ := h.JSONWebKey.Thumbprint(crypto.SHA256)
	if base64.RawURLEncoding.EncodeToString(tp) != key.Thumbprint() {
		t.Errorf("thumbprint %s, go-jose computes %s", key.Thumbprint(), base64.RawURLEncoding.EncodeToString(tp))
	}
	// Nonces are per origin, and bounded.
	if !key.SetNonce("https://up.example.com/x", "n") || key.SetNonce("https://UP.example.com/y", "n") || key.Nonce("https://up.example.com/z") != "n" || key.Nonce("https://other.example.com") != "" {
		t.Error("nonce per origin")
	}
	for i := range 2 * maxDPoPNonces {
		key.SetNonce(fmt.Sprintf("https://h%d.example.com", i), "n")
	}
	if len(key.nonces) > maxDPoPNonces {
		t.Errorf("%d nonces kept, bound %d", len(key.nonces), maxDPoPNonces)
	}
}
