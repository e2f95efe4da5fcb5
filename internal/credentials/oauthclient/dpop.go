package oauthclient

// DPoP as a client (RFC 9449): a key of the gateway's own per upstream,
// proofs on token requests (so the tokens issued are bound to it) and on
// every request that presents such a token (with ath, its hash), and the
// servers' nonces (use_dpop_nonce), remembered per origin and answered
// with one retry.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"time"
)

// TokenTypeDPoP is the token_type of a DPoP-bound access token, and the
// Authorization scheme it is presented with.
const TokenTypeDPoP = "DPoP"

// maxDPoPNonces bounds the origins whose nonce a key remembers.
const maxDPoPNonces = 64

// DPoPKey is a DPoP key pair (ES256), generated in memory: it is never
// written anywhere, so tokens bound to it die with the process (a restart
// asks for new ones). Safe for concurrent use.
type DPoPKey struct {
	key *ecdsa.PrivateKey
	jwk map[string]any
	jkt string
	now func() time.Time

	mu     sync.Mutex
	nonces map[string]string // origin -> the last DPoP-Nonce it sent
}

// NewDPoPKey generates a key; now is the proofs' clock (time.Now when nil).
func NewDPoPKey(now func() time.Time) (*DPoPKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	ecdh, err := k.PublicKey.ECDH()
	if err != nil {
		return nil, err
	}
	raw := ecdh.Bytes() // 0x04 || X || Y
	x := base64.RawURLEncoding.EncodeToString(raw[1:33])
	y := base64.RawURLEncoding.EncodeToString(raw[33:65])
	// RFC 7638 thumbprint: the required members, lexicographic, no spaces.
	sum := sha256.Sum256([]byte(`{"crv":"P-256","kty":"EC","x":"` + x + `","y":"` + y + `"}`))
	return &DPoPKey{
		key:    k,
		jwk:    map[string]any{"kty": "EC", "crv": "P-256", "x": x, "y": y},
		jkt:    base64.RawURLEncoding.EncodeToString(sum[:]),
		now:    now,
		nonces: map[string]string{},
	}, nil
}

// Thumbprint is the key's RFC 7638 JWK thumbprint (a bound token's cnf.jkt).
func (k *DPoPKey) Thumbprint() string { return k.jkt }

// Proof is a fresh proof for a request of method to rawURL; accessToken,
// when not empty, is the token it presents (ath). The origin's last nonce
// goes in it.
func (k *DPoPKey) Proof(method, rawURL, accessToken string) (string, error) {
	htu := HTU(rawURL)
	claims := map[string]any{"jti": randomString(16), "htm": method, "htu": htu, "iat": k.now().Unix()}
	if n := k.Nonce(rawURL); n != "" {
		claims["nonce"] = n
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return signJWT(k.key, "ES256", map[string]any{"typ": "dpop+jwt", "jwk": k.jwk}, claims)
}

// Nonce is the nonce rawURL's origin last sent ("" for none).
func (k *DPoPKey) Nonce(rawURL string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nonces[originKey(rawURL)]
}

// SetNonce remembers the nonce an answer from rawURL's origin carried
// (its DPoP-Nonce header). It reports whether it is new (a retry with it
// may succeed).
func (k *DPoPKey) SetNonce(rawURL, nonce string) bool {
	if nonce == "" || len(nonce) > 1024 {
		return false
	}
	o := originKey(rawURL)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nonces[o] == nonce {
		return false
	}
	if _, ok := k.nonces[o]; !ok && len(k.nonces) >= maxDPoPNonces {
		for victim := range k.nonces { // any one: a dropped nonce costs a retry
			delete(k.nonces, victim)
			break
		}
	}
	k.nonces[o] = nonce
	return true
}

// HTU is a request URL as a DPoP proof's htu: without query and fragment
// (RFC 9449 section 4.2).
func HTU(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		if i := strings.IndexAny(rawURL, "?#"); i >= 0 {
			return rawURL[:i]
		}
		return rawURL
	}
	u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = "", "", "", false
	return u.String()
}

func originKey(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// IsNonceChallenge reports whether a resource server's 401 asks for a DPoP
// nonce: a DPoP challenge with error="use_dpop_nonce" (RFC 9449 section 9).
func IsNonceChallenge(wwwAuthenticate []string) bool {
	for _, v := range wwwAuthenticate {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "dpop") && strings.Contains(v, "use_dpop_nonce") {
			return true
		}
	}
	return false
}

// jwkJSON is the key's public JWK, for tests and logs (no private part).
func (k *DPoPKey) jwkJSON() []byte {
	b, _ := json.Marshal(k.jwk)
	return b
}
