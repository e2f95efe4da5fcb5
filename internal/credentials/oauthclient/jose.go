package oauthclient

// Signing the JWTs the client makes: private_key_jwt client assertions
// (RFC 7523 section 2.2) and DPoP proofs (RFC 9449). Compact JWS only, the
// algorithms RFC 7518 names for the key types a PEM file can hold.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"os"
	"slices"
	"sync"
	"time"
)

// algsFor are the JWS algorithms a key can sign with, its preferred first.
func algsFor(key crypto.Signer) []string {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return []string{"ES256"}
		case elliptic.P384():
			return []string{"ES384"}
		case elliptic.P521():
			return []string{"ES512"}
		}
	case *rsa.PrivateKey:
		return []string{"RS256", "PS256", "RS384", "PS384", "RS512", "PS512"}
	case ed25519.PrivateKey:
		return []string{"EdDSA"}
	}
	return nil
}

// chooseAlg picks the algorithm to sign with: the key's preferred one when
// the server lists none, else the first the server lists that the key can
// make.
func chooseAlg(key crypto.Signer, serverAlgs []string) (string, error) {
	own := algsFor(key)
	if len(own) == 0 {
		return "", errors.New("the key is of a type mcpgw does not sign with (use an RSA, EC P-256/P-384/P-521 or Ed25519 key)")
	}
	if len(serverAlgs) == 0 {
		return own[0], nil
	}
	for _, a := range serverAlgs {
		if slices.Contains(own, a) {
			return a, nil
		}
	}
	return "", fmt.Errorf("the authorization server accepts only %q for token endpoint signatures, none of which the key (%s) makes; use a key of a type it accepts", serverAlgs, own[0])
}

// signJWT makes a compact JWS of claims with header (alg is set here).
func signJWT(key crypto.Signer, alg string, header, claims map[string]any) (string, error) {
	header["alg"] = alg
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	sig, err := signInput(key, alg, []byte(input))
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

func signInput(key crypto.Signer, alg string, input []byte) ([]byte, error) {
	var hf func() hash.Hash
	var ch crypto.Hash
	switch alg[2:] {
	case "256":
		hf, ch = sha256.New, crypto.SHA256
	case "384":
		hf, ch = sha512.New384, crypto.SHA384
	case "512":
		hf, ch = sha512.New, crypto.SHA512
	}
	switch k := key.(type) {
	case ed25519.PrivateKey:
		if alg != "EdDSA" {
			break
		}
		return ed25519.Sign(k, input), nil
	case *ecdsa.PrivateKey:
		if hf == nil || alg[:2] != "ES" {
			break
		}
		d := hf()
		d.Write(input)
		r, s, err := ecdsa.Sign(rand.Reader, k, d.Sum(nil))
		if err != nil {
			return nil, err
		}
		// JWS wants r||s, each padded to the curve's size (RFC 7518 3.4).
		n := (k.Curve.Params().BitSize + 7) / 8
		out := make([]byte, 2*n)
		r.FillBytes(out[:n])
		s.FillBytes(out[n:])
		return out, nil
	case *rsa.PrivateKey:
		if hf == nil {
			break
		}
		d := hf()
		d.Write(input)
		switch alg[:2] {
		case "RS":
			return rsa.SignPKCS1v15(rand.Reader, k, ch, d.Sum(nil))
		case "PS":
			return rsa.SignPSS(rand.Reader, k, ch, d.Sum(nil), &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		}
	}
	return nil, fmt.Errorf("cannot sign %s with this key", alg)
}

// parsePrivateKey reads a PEM private key: PKCS #8, SEC 1 (EC) or PKCS #1
// (RSA).
func parsePrivateKey(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PEM private key in it (want a PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block)")
		}
		var k any
		var err error
		switch blk.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		default:
			continue // e.g. EC PARAMETERS before the key
		}
		if err != nil {
			return nil, fmt.Errorf("its %s block does not parse: %v", blk.Type, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok || algsFor(s) == nil {
			return nil, errors.New("the key is of a type mcpgw does not sign with (use an RSA, EC P-256/P-384/P-521 or Ed25519 key)")
		}
		return s, nil
	}
}

// KeyFile is a private key read from a file, read again when the file
// changes (its size or modification time), so a rotated key is picked up
// without a restart. The key never leaves it except as signatures.
type KeyFile struct {
	Path string
	// KeyID is the kid header of what it signs ("" for none).
	KeyID string

	mu    sync.Mutex
	key   crypto.Signer
	size  int64
	mtime time.Time
}

// Signer returns the file's key, re-read if the file changed.
func (f *KeyFile) Signer() (crypto.Signer, error) {
	st, err := os.Stat(f.Path)
	if err != nil {
		return nil, fmt.Errorf("private key file: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.key != nil && st.Size() == f.size && st.ModTime().Equal(f.mtime) {
		return f.key, nil
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("private key file: %v", err)
	}
	k, err := parsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("private key file %s: %v", f.Path, err)
	}
	f.key, f.size, f.mtime = k, st.Size(), st.ModTime()
	return k, nil
}

// ClientAssertionType is the client_assertion_type of private_key_jwt.
const ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// clientAssertionLifetime is how long a client assertion is good for: one
// token request, with room for clock skew.
const clientAssertionLifetime = 60 * time.Second

// ClientAssertion signs a private_key_jwt client assertion (RFC 7523
// section 2.2, 3): iss and sub the client ID, aud the authorization
// server (its issuer, else its token endpoint), a fresh jti, short-lived.
// serverAlgs is the server's token_endpoint_auth_signing_alg_values_supported.
func (f *KeyFile) ClientAssertion(clientID, audience string, serverAlgs []string, now time.Time) (string, error) {
	key, err := f.Signer()
	if err != nil {
		return "", err
	}
	alg, err := chooseAlg(key, serverAlgs)
	if err != nil {
		return "", err
	}
	header := map[string]any{"typ": "JWT"}
	if f.KeyID != "" {
		header["kid"] = f.KeyID
	}
	return signJWT(key, alg, header, map[string]any{
		"iss": clientID, "sub": clientID, "aud": audience,
		"jti": randomString(16),
		"iat": now.Unix(), "exp": now.Add(clientAssertionLifetime).Unix(),
	})
}
