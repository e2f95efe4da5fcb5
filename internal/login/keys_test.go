package login

import (
	"bytes"
	"context"
	"testing"
)

// A new key put first in the ring signs and seals from then on, while
// what the old one signed or sealed stays good: rotation logs nobody out.
func TestKeyRingRotationKeepsOldTokensAndCookies(t *testing.T) {
	oldSecret, newSecret := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	before, err := newKeyRing([][]byte{oldSecret})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := before.sign([]byte(`{"sub":"alice"}`))
	if err != nil {
		t.Fatal(err)
	}
	cookie := before.seal([]byte("session"), SessionCookie)
	after, err := newKeyRing([][]byte{newSecret, oldSecret})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := after.VerifySignature(context.Background(), tok); err != nil || string(p) != `{"sub":"alice"}` {
		t.Fatalf("a token of the old key after rotation: %s %v", p, err)
	}
	if b, ok := after.open(cookie, SessionCookie); !ok || string(b) != "session" {
		t.Fatal("a cookie of the old key after rotation does not open")
	}
	fresh, _ := after.sign([]byte(`{}`))
	if _, err := before.VerifySignature(context.Background(), fresh); err == nil {
		t.Fatal("the old ring verifies a token of the new key")
	}
	if _, ok := after.open(cookie, FlowCookie); ok {
		t.Fatal("a session cookie opens as a flow cookie")
	}
	// The same secret derives the same key: the JWKS is stable across
	// restarts.
	again, _ := newKeyRing([][]byte{newSecret, oldSecret})
	if !bytes.Equal(again.public, after.public) {
		t.Fatal("the JWKS changed for the same ring")
	}
}
