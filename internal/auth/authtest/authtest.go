// Package authtest is an in-process OpenID Provider for tests: an httptest
// server publishing a discovery document and a JWKS of keys generated in
// the test, and helpers that sign real JWTs with them (or forge bad ones).
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is a signing key the issuer may publish.
type Key struct {
	ID  string
	Alg jose.SignatureAlgorithm
	Key crypto.Signer
}

// Issuer is a test OpenID Provider on 127.0.0.1.
type Issuer struct {
	URL    string
	Server *httptest.Server

	mu        sync.Mutex
	published []*Key
	signer    *Key
	seq       int

	discoveryHits atomic.Int64
	jwksHits      atomic.Int64
}

// NewIssuer starts an issuer publishing one fresh ES256 key.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		is.discoveryHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                is.URL,
			"jwks_uri":                              is.URL + "/jwks",
			"authorization_endpoint":                is.URL + "/authorize",
			"token_endpoint":                        is.URL + "/token",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"ES256", "RS256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.jwksHits.Add(1)
		is.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range is.published {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Key.Public(), KeyID: k.ID, Algorithm: string(k.Alg), Use: "sig"})
		}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	is.Server = httptest.NewServer(mux)
	t.Cleanup(is.Server.Close)
	is.URL = is.Server.URL
	is.Rotate(false)
	return is
}

// NewKey generates a key of alg (ES256 or RS256) with a fresh kid; it is
// neither published nor used until Publish or Rotate.
func (is *Issuer) NewKey(alg jose.SignatureAlgorithm) *Key {
	var (
		k   crypto.Signer
		err error
	)
	switch alg {
	case jose.RS256:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		alg = jose.ES256
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		panic(err)
	}
	is.mu.Lock()
	is.seq++
	id := fmt.Sprintf("key-%d", is.seq)
	is.mu.Unlock()
	return &Key{ID: id, Alg: alg, Key: k}
}

// Publish adds k to the JWKS.
func (is *Issuer) Publish(k *Key) {
	is.mu.Lock()
	is.published = append(is.published, k)
	is.mu.Unlock()
}

// Rotate makes a new ES256 key the signing key and publishes it; the old
// keys stay published when keepOld, else they are withdrawn.
func (is *Issuer) Rotate(keepOld bool) *Key {
	k := is.NewKey(jose.ES256)
	is.UseKey(k, keepOld)
	return k
}

// UseKey publishes k and signs with it from now on.
func (is *Issuer) UseKey(k *Key, keepOld bool) {
	is.mu.Lock()
	if !keepOld {
		is.published = nil
	}
	is.published = append(is.published, k)
	is.signer = k
	is.mu.Unlock()
}

// SigningKey is the key Token signs with.
func (is *Issuer) SigningKey() *Key {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.signer
}

// JWKSFetches counts requests for the JWKS.
func (is *Issuer) JWKSFetches() int64 { return is.jwksHits.Load() }

// DiscoveryFetches counts requests for the discovery document.
func (is *Issuer) DiscoveryFetches() int64 { return is.discoveryHits.Load() }

// Claims returns typical access token claims: this issuer, sub, aud, an
// hour's validity, and scope when scopes are given.
func (is *Issuer) Claims(sub, aud string, scopes ...string) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss":       is.URL,
		"sub":       sub,
		"aud":       aud,
		"iat":       now.Unix(),
		"exp":       now.Add(time.Hour).Unix(),
		"client_id": "test-client",
		"jti":       fmt.Sprintf("%d", now.UnixNano()),
	}
	if len(scopes) > 0 {
		s := ""
		for i, sc := range scopes {
			if i > 0 {
				s += " "
			}
			s += sc
		}
		c["scope"] = s
	}
	return c
}

// Token signs claims with the current signing key.
func (is *Issuer) Token(claims map[string]any) string {
	return Sign(is.SigningKey(), claims)
}

// Sign signs claims with k, naming k's kid in the header.
func Sign(k *Key, claims map[string]any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: jose.JSONWebKey{Key: k.Key, KeyID: k.ID}}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		panic(err)
	}
	return sign(signer, claims)
}

func sign(signer jose.Signer, claims map[string]any) string {
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		panic(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return s
}

// Unsigned returns claims as a JWT with alg "none" and no signature.
func Unsigned(claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + "."
}

// HS256WithPublicKey forges the classic algorithm-confusion token: HS256
// with the issuer's public key (PEM) as the HMAC secret, naming its kid.
func HS256WithPublicKey(k *Key, claims map[string]any) string {
	der, err := x509.MarshalPKIXPublicKey(k.Key.Public())
	if err != nil {
		panic(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: k.ID}}, nil)
	if err != nil {
		panic(err)
	}
	return sign(signer, claims)
}
