package peruser

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"sync/atomic"
)

// ring seals and opens what this package hands out (start links, states)
// and keeps (token records) with AES-256-GCM. Its keys are derived with
// HKDF from the session key ring (sessions.key_file), one derived key per
// ring key and purpose, so a sealed session id can never be replayed as a
// state or a token record and the other way round. The first key seals;
// any opens, so rotating the ring (new key first) keeps what was sealed
// readable until the old key is removed. A reload rekeys it in place
// (rekey), so what is sealed afterwards uses the new first key.
type ring struct {
	purpose string
	aeads   atomic.Pointer[[]cipher.AEAD]
}

// Purposes: each derives its own keys.
const (
	purposeLink   = "mcpgw peruser start link v1"
	purposeState  = "mcpgw peruser state v1"
	purposeRecord = "mcpgw peruser token record v1"
)

func newRing(keys [][]byte, purpose string) (*ring, error) {
	r := &ring{purpose: purpose}
	if err := r.rekey(keys); err != nil {
		return nil, err
	}
	return r, nil
}

// rekey replaces the ring's keys (sessions.key_file reread on a reload).
func (r *ring) rekey(keys [][]byte) error {
	if len(keys) == 0 {
		return errors.New("per-user authorization needs the session key ring (sessions.key_file); add it")
	}
	var aeads []cipher.AEAD
	for i, k := range keys {
		dk, err := hkdf.Key(sha256.New, k, nil, r.purpose, 32)
		if err != nil {
			return errors.New("session key " + strconv.Itoa(i+1) + ": " + err.Error())
		}
		block, err := aes.NewCipher(dk)
		if err != nil {
			return err
		}
		a, err := cipher.NewGCM(block)
		if err != nil {
			return err
		}
		aeads = append(aeads, a)
	}
	r.aeads.Store(&aeads)
	return nil
}

// seal encrypts plain bound to ad (which is authenticated, not stored).
func (r *ring) seal(plain, ad []byte) []byte {
	a := (*r.aeads.Load())[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return a.Seal(nonce, nonce, plain, ad)
}

// open decrypts what seal made with any key of the ring and the same ad.
func (r *ring) open(sealed, ad []byte) ([]byte, bool) {
	for _, a := range *r.aeads.Load() {
		if len(sealed) < a.NonceSize()+a.Overhead() {
			continue
		}
		if plain, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], ad); err == nil {
			return plain, true
		}
	}
	return nil, false
}

// sealString and openString are seal and open in URL-safe base64.
func (r *ring) sealString(plain, ad []byte) string {
	return base64.RawURLEncoding.EncodeToString(r.seal(plain, ad))
}

func (r *ring) openString(s string, ad []byte) ([]byte, bool) {
	if len(s) > maxSealedLen {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	return r.open(b, ad)
}

// maxSealedLen bounds a link or state a browser brings back: what the
// gateway seals is far smaller, so anything longer is refused unread.
const maxSealedLen = 4096

// randomID returns n random bytes in URL-safe base64.
func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
