package sessions

import (
	"strings"
	"testing"
	"time"
)

func TestSessionTokens(t *testing.T) {
	oldKeys, err := ParseSessionKeys([]byte("00112233445566778899aabbccddeeff\n"))
	if err != nil {
		t.Fatal(err)
	}
	ring, err := ParseSessionKeys([]byte("# rotated\nq5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n\n00112233445566778899aabbccddeeff\n"))
	if err != nil || len(ring) != 2 {
		t.Fatalf("ring: %v %d", err, len(ring))
	}
	old, _ := newSealer(oldKeys)
	cur, _ := newSealer(ring)
	now := time.Now()
	c := sessionClaims{Route: "/mcp", Owner: "key:a", Version: "2025-11-25", Issued: now.Unix()}

	id := old.seal(c)
	if got, ok := cur.open(id, now); !ok || got.Owner != "key:a" || got.Route != "/mcp" {
		t.Errorf("a token sealed with the previous key must open after rotation: %+v %v", got, ok)
	}
	if _, ok := old.open(cur.seal(c), now); ok {
		t.Error("a token sealed with the new key must not open with the old ring alone")
	}
	if a, b := cur.seal(c), cur.seal(c); a == b {
		t.Error("two sessions with the same claims got the same id")
	}
	fresh := cur.seal(c)
	if _, ok := cur.open(fresh[:len(fresh)-2]+"xx", now); ok {
		t.Error("a tampered token opened")
	}
	if _, ok := cur.open(strings.TrimPrefix(fresh, sessionTokenPrefix), now); ok {
		t.Error("a token without its prefix opened")
	}
	if _, ok := cur.open(fresh, now.Add(sessionTokenMaxAge+time.Minute)); ok {
		t.Error("an expired token opened")
	}
	for _, bad := range []string{"", "# only a comment\n", "not-a-key\n", "AAAA\n"} {
		if _, err := ParseSessionKeys([]byte(bad)); err == nil {
			t.Errorf("ParseSessionKeys(%q) accepted it", bad)
		}
	}
}

func FuzzSessionTokenOpen(f *testing.F) {
	keys, _ := ParseSessionKeys([]byte("00112233445566778899aabbccddeeff\n"))
	s, _ := newSealer(keys)
	f.Add(s.seal(sessionClaims{Route: "/mcp", Issued: time.Now().Unix()}))
	f.Add("s1.")
	f.Add("s1.AAAA")
	f.Fuzz(func(t *testing.T, id string) {
		_, _ = s.open(id, time.Now()) // must never panic
	})
}
