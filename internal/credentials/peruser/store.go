package peruser

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/principal"
)

// Backend keeps one upstream's sealed token records by key (a hash of the
// principal key): a file (FileBackend) or Redis (RedisBackend). Values are
// opaque to it; what it must guarantee is that a write is whole (never a
// torn record) and that it holds at most its bound.
type Backend interface {
	// Get returns the value at key.
	Get(ctx context.Context, key string) ([]byte, bool, error)
	// Put stores val at key until expires (zero: no expiry). A key not yet
	// held is refused with ErrFull when the backend holds its bound.
	Put(ctx context.Context, key string, val []byte, expires time.Time) error
	// Delete removes key and reports whether it was held.
	Delete(ctx context.Context, key string) (bool, error)
	// DeleteIf removes key only if it still holds val (compare and
	// delete, atomic across replicas) and reports whether it did: a
	// replica whose refresh failed must not drop a record another replica
	// replaced meanwhile.
	DeleteIf(ctx context.Context, key string, val []byte) (bool, error)
	// Clear removes every key and reports how many there were.
	Clear(ctx context.Context) (int, error)
	// Len is how many keys are held.
	Len(ctx context.Context) (int, error)
}

// ErrFull refuses a new principal's tokens when the store holds
// upstreams.NAME.auth.per_user.max_tokens of them.
var ErrFull = errors.New("the token store is full (upstreams.NAME.auth.per_user.max_tokens); raise max_tokens, or revoke unused tokens with `mcpgw tokens revoke`")

// record is one principal's authorization for one upstream, as sealed in
// the store. Access is empty once the upstream refused it (the refresh
// token is then used once).
type record struct {
	Access         string          `json:"a,omitempty"`
	Refresh        string          `json:"r,omitempty"`
	Expiry         int64           `json:"x,omitempty"`  // unix seconds; 0: unknown
	RefreshExpiry  int64           `json:"rx,omitempty"` // unix seconds; 0: unknown
	AfterRefusal   bool            `json:"f,omitempty"`  // Access came from the refresh a refusal made
	Stored         int64           `json:"t"`
	Principal      string          `json:"p"`
	Upstream       string          `json:"u"`
	ElicitationFor string          `json:"e,omitempty"` // the elicitation the flow that made it completed
	Scopes         []string        `json:"s,omitempty"` // asked for and granted (Token.Scopes)
	Grant          json.RawMessage `json:"g,omitempty"` // where and as whom to refresh (Client's)

	// key and sealed are where and as what get found the record, so a
	// drop can be made conditional on it being unchanged (dropIf).
	key    string
	sealed []byte
}

func (r *record) expiry() time.Time {
	if r.Expiry == 0 {
		return time.Time{}
	}
	return time.Unix(r.Expiry, 0)
}

// storeExpiry is when the record is of no more use: when its refresh
// token expires, or without one when the access token does (zero: never
// known).
func (r *record) storeExpiry() time.Time {
	switch {
	case r.Refresh != "" && r.RefreshExpiry != 0:
		return time.Unix(r.RefreshExpiry, 0)
	case r.Refresh == "" && r.Expiry != 0:
		return time.Unix(r.Expiry, 0)
	}
	return time.Time{}
}

// tokens is an upstream's token store: records sealed with the ring,
// each bound (as additional data) to its upstream and principal, so a
// record copied to another principal's key does not open; and kept under
// an HMAC of the two (keyRing), so neither a file nor Redis says who
// linked an account to whoever reads it: principal names are guessable,
// and a plain hash of one is checked by anyone in a moment.
type tokens struct {
	b        Backend
	ring     *ring
	keys     *keyRing
	upstream string
}

// purposeStoreKey derives the HMAC keys of the store's keys.
const purposeStoreKey = "mcpgw peruser store key v1"

// keyRing computes backend keys: an HMAC-SHA256 of upstream and
// principal under a key derived (HKDF) from each session key, newest
// first. The newest is where records are kept; the others, and the
// unkeyed SHA-256 of earlier versions (StoreKey), are where they may
// still be after a key rotation or an upgrade, and are moved from
// (tokens.get).
type keyRing struct {
	keys atomic.Pointer[[][]byte]
}

func newKeyRing(keys [][]byte) (*keyRing, error) {
	k := &keyRing{}
	return k, k.rekey(keys)
}

func (k *keyRing) rekey(keys [][]byte) error {
	if len(keys) == 0 {
		return errors.New("per-user authorization needs the session key ring (sessions.key_file); add it")
	}
	var derived [][]byte
	for _, key := range keys {
		dk, err := hkdf.Key(sha256.New, key, nil, purposeStoreKey, 32)
		if err != nil {
			return err
		}
		derived = append(derived, dk)
	}
	k.keys.Store(&derived)
	return nil
}

// all is principal's backend keys for upstream: the current one first,
// then the older ring keys', then the unkeyed one.
func (k *keyRing) all(upstream, principal string) []string {
	ks := *k.keys.Load()
	out := make([]string, 0, len(ks)+1)
	for _, dk := range ks {
		m := hmac.New(sha256.New, dk)
		m.Write([]byte(upstream + "\x00" + principal))
		out = append(out, hex.EncodeToString(m.Sum(nil)))
	}
	return append(out, StoreKey(upstream, principal))
}

// StoreKeys is every backend key principal's record for upstream may be
// under with the session key ring keys (newest first): the current one
// first (for revocation, which drops them all).
func StoreKeys(keys [][]byte, upstream, principal string) ([]string, error) {
	k, err := newKeyRing(keys)
	if err != nil {
		return nil, err
	}
	return k.all(upstream, principal), nil
}

// StoreKey is the unkeyed SHA-256 key records had before the store's
// keys were HMACs; a record found there is moved (tokens.get).
func StoreKey(upstream, principal string) string {
	h := sha256.Sum256([]byte(upstream + "\x00" + principal))
	return hex.EncodeToString(h[:])
}

func (t *tokens) ad(principal string) []byte {
	return []byte(purposeRecord + "\x00" + t.upstream + "\x00" + principal)
}

// get returns principal's record; one that does not open (sealed with a
// key no longer in the ring, or tampered with) counts as none.
func (t *tokens) get(ctx context.Context, principal string) (*record, error) {
	keys := t.keys.all(t.upstream, principal)
	for i, key := range keys {
		val, ok, err := t.b.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		r := t.open(principal, val)
		if r == nil {
			continue
		}
		r.key, r.sealed = key, val
		if i > 0 {
			t.move(ctx, r, keys[0])
		}
		return r, nil
	}
	return nil, nil
}

// open decrypts a record of principal (nil: it does not open, or is
// another's).
func (t *tokens) open(principal string, val []byte) *record {
	plain, ok := t.ring.open(val, t.ad(principal))
	if !ok {
		return nil
	}
	var r record
	if json.Unmarshal(plain, &r) != nil || r.Principal != principal || r.Upstream != t.upstream {
		return nil
	}
	return &r
}

// move puts r, found under an older key, under the current key to, and
// drops the old one, so a key rotation or an upgrade loses no link. At
// the store's bound the old key goes first, to make room. A failure
// leaves r where it was (found there again next time).
func (t *tokens) move(ctx context.Context, r *record, to string) {
	err := t.b.Put(ctx, to, r.sealed, r.storeExpiry())
	if errors.Is(err, ErrFull) {
		if _, err = t.b.DeleteIf(ctx, r.key, r.sealed); err == nil {
			err = t.b.Put(ctx, to, r.sealed, r.storeExpiry())
		}
	}
	if err != nil {
		return
	}
	if _, err := t.b.DeleteIf(ctx, r.key, r.sealed); err != nil {
		return
	}
	r.key = to
}

func (t *tokens) put(ctx context.Context, r *record) error {
	plain, err := json.Marshal(r)
	if err != nil {
		return err
	}
	keys := t.keys.all(t.upstream, r.Principal)
	if err := t.b.Put(ctx, keys[0], t.ring.seal(plain, t.ad(r.Principal)), r.storeExpiry()); err != nil {
		if errors.Is(err, ErrFull) {
			return err
		}
		return fmt.Errorf("token store: %w", err)
	}
	return nil
}

// dropOld removes principal's records under older keys (a new grant
// supersedes them; get moves them otherwise).
func (t *tokens) dropOld(ctx context.Context, principal string) {
	for _, k := range t.keys.all(t.upstream, principal)[1:] {
		_, _ = t.b.Delete(ctx, k)
	}
}

// drop removes principal's record, wherever it is kept.
func (t *tokens) drop(ctx context.Context, principal string) (bool, error) {
	held := false
	for _, k := range t.keys.all(t.upstream, principal) {
		ok, err := t.b.Delete(ctx, k)
		if err != nil {
			return held, err
		}
		held = held || ok
	}
	return held, nil
}

// dropIf drops r only if the store still holds exactly r (as get read
// it), and reports whether it did.
func (t *tokens) dropIf(ctx context.Context, r *record) (bool, error) {
	if r.key == "" {
		return false, nil
	}
	return t.b.DeleteIf(ctx, r.key, r.sealed)
}

// PrincipalKey is the binding key (principal.Principal.Key) of a
// principal as logs and the CLI name it: "apikey:NAME" for an API key,
// "SUB@ISSUER" for a token (principal.KeyOf).
func PrincipalKey(s string) (string, error) { return principal.KeyOf(s) }

// principalName is how logs name a principal key (the inverse of
// PrincipalKey): "SUB@ISSUER" or "apikey:NAME".
func principalName(key string) string { return principal.NameOfKey(key) }
