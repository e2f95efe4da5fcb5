package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keySet is an issuer's JWKS, fetched on first use, cached, and refetched
// when a token names a kid it does not hold (key rotation) or when it is
// older than maxAge. It implements go-oidc's KeySet.
//
// go-oidc's own RemoteKeySet refetches the JWKS for every token whose
// signature fails, so a stream of forged tokens turns into a stream of
// requests to the identity provider. Here a refetch happens only for an
// unknown kid, at most once per minRefresh, and a bad signature under a
// known kid is refused from the cache.
type keySet struct {
	url        string
	client     *http.Client
	algs       []jose.SignatureAlgorithm
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	fetched  time.Time     // last successful fetch
	tried    time.Time     // last attempt, successful or not
	lastErr  error         // of the last attempt
	inflight chan struct{} // closed when the running fetch ends
	gen      atomic.Uint64 // counts successful fetches (tokenCache)
}

// keyError classifies a signature failure for Authenticate. go-oidc wraps
// KeySet errors with %v, losing their type, so verify also records it in a
// slot the caller put in the context.
type keyError struct {
	reason Reason
	detail string
}

type keyErrSlot struct{}

func recordKeyError(ctx context.Context, e *keyError) error {
	if slot, ok := ctx.Value(keyErrSlot{}).(**keyError); ok {
		*slot = e
	}
	return errors.New(e.detail)
}

// VerifySignature verifies jwt's signature with the issuer's keys and
// returns the payload.
func (k *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, k.algs)
	if err != nil {
		return nil, recordKeyError(ctx, &keyError{Malformed, "unreadable JWS"})
	}
	if len(jws.Signatures) != 1 {
		return nil, recordKeyError(ctx, &keyError{Malformed, "a token must carry exactly one signature"})
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := k.current(ctx)
	if err != nil && keys == nil {
		return nil, recordKeyError(ctx, &keyError{Unavailable, "the issuer's keys cannot be fetched: " + err.Error()})
	}
	payload, known := verifyWith(jws, keys, kid)
	if payload != nil {
		return payload, nil
	}
	if known {
		return nil, recordKeyError(ctx, &keyError{BadSignature, "the signature does not verify with the issuer's key " + quoteDetail(kid)})
	}
	// A kid we do not hold: the issuer may have rotated its keys.
	if fresh, ok := k.refresh(ctx); ok {
		if payload, _ = verifyWith(jws, fresh, kid); payload != nil {
			return payload, nil
		}
	}
	if kid == "" {
		return nil, recordKeyError(ctx, &keyError{BadSignature, "no key of the issuer verifies the signature"})
	}
	return nil, recordKeyError(ctx, &keyError{BadSignature, "the issuer publishes no key " + quoteDetail(kid)})
}

// verifyWith tries the keys matching kid (every key when the token names
// none). known reports whether a key with that kid exists.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) (payload []byte, known bool) {
	for i := range keys {
		key := &keys[i]
		if kid != "" && key.KeyID != kid {
			continue
		}
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		known = known || kid != ""
		if p, err := jws.Verify(key); err == nil {
			return p, true
		}
	}
	return nil, known
}

// current returns the cached keys, fetching them first when there are
// none or they are older than maxAge. Stale keys are still returned when
// the refetch fails: an identity provider that is briefly down must not
// lock every user out.
func (k *keySet) current(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	keys, fetched, tried := k.keys, k.fetched, k.tried
	k.mu.Unlock()
	now := k.now()
	switch {
	case keys != nil && now.Sub(fetched) < k.maxAge:
		return keys, nil
	case keys != nil && now.Sub(tried) < k.minRefresh:
		return keys, nil // stale, but we tried lately
	case keys == nil && !tried.IsZero() && now.Sub(tried) < k.minRefresh:
		k.mu.Lock()
		err := k.lastErr
		k.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	fresh, err := k.fetch(ctx)
	if err != nil {
		return keys, err
	}
	return fresh, nil
}

// refresh refetches the keys for an unknown kid unless that was done
// within minRefresh.
func (k *keySet) refresh(ctx context.Context) ([]jose.JSONWebKey, bool) {
	k.mu.Lock()
	recent := k.now().Sub(k.tried) < k.minRefresh && k.inflight == nil
	k.mu.Unlock()
	if recent {
		return nil, false
	}
	keys, err := k.fetch(ctx)
	return keys, err == nil
}

// fetch downloads the JWKS; concurrent callers share one request.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	wait := k.inflight
	if wait == nil {
		k.inflight = make(chan struct{})
		k.mu.Unlock()
		keys, err := k.download()
		k.mu.Lock()
		k.tried, k.lastErr = k.now(), err
		if err == nil {
			k.keys, k.fetched = keys, k.tried
			k.gen.Add(1)
		}
		close(k.inflight)
		k.inflight = nil
		k.mu.Unlock()
		return keys, err
	}
	k.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lastErr != nil {
		return nil, k.lastErr
	}
	return k.keys, nil
}

func (k *keySet) download() ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", k.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", k.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", k.url, resp.StatusCode)
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("GET %s: not a JWKS: %w", k.url, err)
	}
	keys := []jose.JSONWebKey{} // non-nil: fetched, possibly empty
	for _, r := range raw.Keys {
		var key jose.JSONWebKey
		// Keys of types go-jose does not know, or symmetric keys (which
		// have no place in a public JWKS), are skipped, not fatal.
		if json.Unmarshal(r, &key) != nil || !key.IsPublic() || !key.Valid() {
			continue
		}
		keys = append(keys, key)
	}
	return keys, nil
}
