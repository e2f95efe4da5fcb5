package sessions

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

// With sessions.key_file, a session id is not a random handle but an
// AEAD token (AES-GCM) that carries what the session needs — its route, the
// principal it is bound to, the negotiated revision and the client's
// capabilities — so that any replica holding the same key ring can serve it
// without a shared store: a replica that does not know the id opens the
// token and recreates the session. Keys rotate by putting the new key
// first: tokens are sealed with the first, opened with any.
//
// What a token cannot carry stays with the replica that holds it: GET
// streams, subscriptions, in-flight calls, and — without sessions.redis —
// replay logs. A DELETE ends the session on the replica that receives it
// (and is remembered there until the token would expire anyway); with
// sessions.redis it is revoked for every replica too (redisstore.go).

const (
	sessionTokenPrefix = "s1."
	// sessionTokenMaxAge bounds how long a token is honoured, so a leaked or
	// deleted one does not live forever.
	sessionTokenMaxAge = 24 * time.Hour
	sessionTokenAD     = "mcpgw session v1"
)

// sessionClaims is what a session token carries.
type sessionClaims struct {
	Route   string          `json:"r"`
	Owner   string          `json:"o"`
	Version mcp.Revision    `json:"v"`
	Caps    json.RawMessage `json:"c,omitempty"`
	Info    json.RawMessage `json:"i,omitempty"`
	Issued  int64           `json:"t"`
}

// sealer seals and opens session tokens with a key ring, newest key first.
type sealer struct {
	aeads []cipher.AEAD
}

func newSealer(keys [][]byte) (*sealer, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	s := &sealer{}
	for i, k := range keys {
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, errors.New("session key " + strconv.Itoa(i+1) + ": must be 16, 24 or 32 bytes")
		}
		a, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, a)
	}
	return s, nil
}

// seal returns the session id for c.
func (s *sealer) seal(c sessionClaims) string {
	plain, _ := json.Marshal(c)
	a := s.aeads[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return sessionTokenPrefix + base64.RawURLEncoding.EncodeToString(a.Seal(nonce, nonce, plain, []byte(sessionTokenAD)))
}

// open returns the claims of a token sealed with any key of the ring and
// not older than sessionTokenMaxAge.
func (s *sealer) open(id string, now time.Time) (sessionClaims, bool) {
	body, ok := strings.CutPrefix(id, sessionTokenPrefix)
	if !ok {
		return sessionClaims{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return sessionClaims{}, false
	}
	for _, a := range s.aeads {
		if len(raw) < a.NonceSize() {
			continue
		}
		plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], []byte(sessionTokenAD))
		if err != nil {
			continue
		}
		var c sessionClaims
		if json.Unmarshal(plain, &c) != nil {
			return sessionClaims{}, false
		}
		issued := time.Unix(c.Issued, 0)
		if now.Sub(issued) > sessionTokenMaxAge || issued.After(now.Add(time.Minute)) {
			return sessionClaims{}, false
		}
		return c, true
	}
	return sessionClaims{}, false
}

// ParseSessionKeys reads a session key ring: one key per line, newest
// first, each base64 (standard or URL alphabet) or hex of 16, 24 or 32
// bytes; blank lines and lines starting with # are skipped.
func ParseSessionKeys(data []byte) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := decodeKey(line)
		if err != nil {
			return nil, errors.New("line " + strconv.Itoa(i+1) + ": " + err.Error())
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in the file; put one key per line (e.g. the output of `openssl rand -base64 32`), newest first")
	}
	return keys, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, dec := range []func(string) ([]byte, error){
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, hex.DecodeString,
	} {
		if k, err := dec(s); err == nil && (len(k) == 16 || len(k) == 24 || len(k) == 32) {
			return k, nil
		}
	}
	return nil, errors.New("not a 16, 24 or 32 byte key in base64 or hex; make one with `openssl rand -base64 32`")
}
