package login

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A burst of changes costs one write, not one each, and nothing is lost:
// the timer (or close, at shutdown) writes the last of them.
func TestStoreCoalescesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), DefaultStateFile)
	now := time.Unix(1000, 0)
	s, err := openStore(path, func() time.Time { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		s.mu.Lock()
		s.st.Clients[string(rune('a'+i%26))+strings.Repeat("x", i)] = &client{ID: "c", LastUsed: now}
		if err := s.save(); err != nil {
			t.Fatal(err)
		}
		s.mu.Unlock()
	}
	if s.writes != 1 {
		t.Fatalf("%d writes for a burst of 100 changes; want 1 (the first), the rest coalesced", s.writes)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if s.writes != 2 {
		t.Fatalf("%d writes after close; want the pending one written", s.writes)
	}
	again, err := openStore(path, time.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.st.Clients) != 100 {
		t.Fatalf("%d clients after a restart; want all 100", len(again.st.Clients))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file %v %v; want mode 0600", fi, err)
	}
}
