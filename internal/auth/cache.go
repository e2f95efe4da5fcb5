package auth

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"
)

// Verifying a JWT signature costs 60-110 µs of CPU (RS256, ES256), several
// times what the gateway spends on the rest of a request, and a client
// sends the same token with every request for its lifetime. So verified
// tokens are remembered by their SHA-256 for a short while: a hit re-checks
// exp, nbf and the audience for the route, and costs about a microsecond.
// An entry lives at most tokenCacheTTL and is dropped as soon as the
// issuer's keys are fetched again, so a token of a key the issuer withdrew
// stops working when the gateway learns of it, as without the cache.
const (
	tokenCacheTTL  = 2 * time.Minute
	tokenCacheSize = 10_000
)

type cachedToken struct {
	principal *Principal
	issuer    *issuer
	aud       []string
	notBefore time.Time // zero when the token has no nbf
	until     time.Time // when the entry is dropped
	keyGen    uint64    // the issuer's key generation it was verified with
}

type tokenCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*cachedToken
}

func newTokenCache() *tokenCache {
	return &tokenCache{entries: map[[sha256.Size]byte]*cachedToken{}}
}

// get returns the principal of a verified token if it is cached and still
// valid at now for an audience that accepts takes.
func (c *tokenCache) get(h [sha256.Size]byte, now time.Time, accepts func(is *issuer, aud string) bool) *Principal {
	c.mu.Lock()
	e := c.entries[h]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	leeway := e.issuer.cfg.Leeway.D()
	if now.After(e.until) || now.After(e.principal.Expiry.Add(leeway)) || now.Add(leeway).Before(e.notBefore) || e.keyGen != e.issuer.keyGen() {
		c.mu.Lock()
		delete(c.entries, h)
		c.mu.Unlock()
		return nil
	}
	if !slices.ContainsFunc(e.aud, func(a string) bool { return accepts(e.issuer, a) }) {
		return nil // the full check explains the refusal
	}
	return e.principal
}

func (c *tokenCache) put(h [sha256.Size]byte, e *cachedToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= tokenCacheSize {
		// Evict an arbitrary tenth: map order is random enough, and a
		// flood of distinct valid tokens is not a pattern worth an LRU.
		n := tokenCacheSize / 10
		for k := range c.entries {
			delete(c.entries, k)
			if n--; n == 0 {
				break
			}
		}
	}
	c.entries[h] = e
}
