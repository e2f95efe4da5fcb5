package login

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// DefaultKeyFile is the login key ring's name in the state directory.
const DefaultKeyFile = "login-keys"

// keyRing holds the keys derived from the login key ring file: one
// signing key and one cookie key per line, newest first. The newest signs
// and seals; every one verifies and opens, so an operator rotates by
// putting a new line first and removes the old one once the longest
// lived thing it signed (a session cookie) has expired — nobody is
// logged out by the rotation. The file has the session key ring's
// format (one base64 32-byte secret a line) and is made the same way.
type keyRing struct {
	signers []*ecdsa.PrivateKey
	kids    []string
	aeads   []cipher.AEAD
	public  []byte // the JWKS document
}

// loadKeyRing reads (or makes) the ring at path; an empty path makes an
// ephemeral ring (tests, or a gateway without a state directory: tokens
// and cookies then end with the process).
func loadKeyRing(path string) (*keyRing, bool, error) {
	var secrets [][]byte
	created := false
	if path == "" {
		s := make([]byte, 32)
		if _, err := rand.Read(s); err != nil {
			return nil, false, err
		}
		secrets = [][]byte{s}
	} else {
		var err error
		secrets, created, err = sessions.LoadOrCreateKeyRing(path)
		if err != nil {
			return nil, false, fmt.Errorf("login key ring: %w", err)
		}
	}
	k, err := newKeyRing(secrets)
	return k, created, err
}

func newKeyRing(secrets [][]byte) (*keyRing, error) {
	if len(secrets) == 0 {
		return nil, errors.New("login key ring: no key")
	}
	k := &keyRing{}
	var set jose.JSONWebKeySet
	for _, s := range secrets {
		priv, err := signingKey(s)
		if err != nil {
			return nil, err
		}
		pub, _ := priv.PublicKey.Bytes()
		sum := sha256.Sum256(pub)
		kid := base64.RawURLEncoding.EncodeToString(sum[:12])
		block, err := aes.NewCipher(derive(s, "mcpgw login cookie key"))
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		k.signers = append(k.signers, priv)
		k.kids = append(k.kids, kid)
		k.aeads = append(k.aeads, aead)
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &priv.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
	}
	pub, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	k.public = pub
	return k, nil
}

// derive is HMAC-SHA256(secret, label): independent keys from one secret.
func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// signingKey derives a P-256 key from a ring secret; a derived scalar out
// of range (odds about 2^-32) is derived again.
func signingKey(secret []byte) (*ecdsa.PrivateKey, error) {
	seed := derive(secret, "mcpgw login signing key")
	for range 8 {
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seed); err == nil {
			return k, nil
		}
		seed = derive(seed, "again")
	}
	return nil, errors.New("login key ring: cannot derive a signing key")
}

// sign makes a compact JWS of payload with the newest key.
func (k *keyRing) sign(payload []byte) (string, error) {
	opts := (&jose.SignerOptions{}).WithType("at+jwt").WithHeader(jose.HeaderKey("kid"), k.kids[0])
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.signers[0]}, opts)
	if err != nil {
		return "", err
	}
	obj, err := s.Sign(payload)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// VerifySignature checks a token signed by one of the ring's keys and
// returns its payload (go-oidc's KeySet, used by internal/auth).
func (k *keyRing) VerifySignature(_ context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, errors.New("unreadable JWS")
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must carry exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	for i, id := range k.kids {
		if id == kid {
			return jws.Verify(&k.signers[i].PublicKey)
		}
	}
	return nil, fmt.Errorf("the token names key %q, which is not in the gateway's login key ring", kid)
}

// seal encrypts b with the newest cookie key: base64url(nonce || sealed).
func (k *keyRing) seal(b []byte, label string) string {
	a := k.aeads[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(b)+a.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(a.Seal(nonce, nonce, b, []byte(label)))
}

// open decrypts what seal made with any key of the ring, for label.
func (k *keyRing) open(s, label string) ([]byte, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	for _, a := range k.aeads {
		if len(raw) < a.NonceSize() {
			continue
		}
		if b, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], []byte(label)); err == nil {
			return b, true
		}
	}
	return nil, false
}
