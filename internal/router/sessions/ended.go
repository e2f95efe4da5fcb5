package sessions

import (
	"crypto/sha256"
	"time"
)

// endedSet remembers the sealed session ids ended on this replica (DELETE,
// idle reaping), so that one is not recreated from its token here until it
// would have expired anyway. Ids are kept as hashes in the order they
// ended: expiry trims from the oldest end, so ending a session costs O(1)
// however many are remembered, and at most max are kept — past that the
// oldest are forgotten (such a token is accepted again here, as after a
// restart; docs/security.md says so). The caller holds the store's lock.
type endedSet struct {
	at    map[endedKey]time.Time // when each ended; the same keys as order[head:]
	order []endedEntry           // oldest first; order[head:] are live
	head  int
}

type endedKey [16]byte

type endedEntry struct {
	key endedKey
	at  time.Time
}

func endedKeyOf(id string) endedKey {
	h := sha256.Sum256([]byte(id))
	var k endedKey
	copy(k[:], h[:])
	return k
}

// add records id as ended at now, forgetting what is older than maxAge and
// the oldest beyond max entries.
func (e *endedSet) add(id string, now time.Time, maxAge time.Duration, max int) {
	if e.at == nil {
		e.at = map[endedKey]time.Time{}
	}
	k := endedKeyOf(id)
	if _, ok := e.at[k]; !ok { // the first end counts: at and order stay one to one
		e.at[k] = now
		e.order = append(e.order, endedEntry{k, now})
	}
	for e.head < len(e.order) && (now.Sub(e.order[e.head].at) > maxAge || len(e.order)-e.head > max) {
		delete(e.at, e.order[e.head].key)
		e.order[e.head] = endedEntry{}
		e.head++
	}
	// Reclaim the consumed front once it is half the slice.
	if e.head > 64 && e.head*2 >= len(e.order) {
		e.order = append(e.order[:0:0], e.order[e.head:]...)
		e.head = 0
	}
}

// has reports whether id was ended here (and not yet forgotten).
func (e *endedSet) has(id string) bool {
	_, ok := e.at[endedKeyOf(id)]
	return ok
}

// len is how many ended ids are remembered.
func (e *endedSet) len() int { return len(e.at) }
