package sessions

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestLoadOrCreateKeyRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", DefaultKeyRingFile)
	keys, created, err := LoadOrCreateKeyRing(path)
	if err != nil || !created || len(keys) != 1 || len(keys[0]) != 32 {
		t.Fatalf("first start: keys %d, created %v, err %v; want one new 32-byte key", len(keys), created, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("ring mode %v, want 0600", st.Mode().Perm())
	}
	if d, _ := os.Stat(filepath.Dir(path)); d.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode %v, want 0700", d.Mode().Perm())
	}
	again, created, err := LoadOrCreateKeyRing(path)
	if err != nil || created || string(again[0]) != string(keys[0]) {
		t.Fatalf("second start: created %v, err %v, same key %v; want the ring kept", created, err, err == nil && string(again[0]) == string(keys[0]))
	}
}

// Replicas (or a restart racing its predecessor) sharing a state
// directory end up with one ring, not one each.
func TestLoadOrCreateKeyRingRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), DefaultKeyRingFile)
	const n = 8
	got := make([][]byte, n)
	var made int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys, created, err := LoadOrCreateKeyRing(path)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			got[i] = keys[0]
			if created {
				made++
			}
		}()
	}
	wg.Wait()
	if made != 1 {
		t.Errorf("%d processes made a ring, want exactly 1", made)
	}
	for i := range got {
		if string(got[i]) != string(got[0]) {
			t.Fatalf("starter %d read another key than starter 0", i)
		}
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".session-keys-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestLoadOrCreateKeyRingBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), DefaultKeyRingFile)
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKeyRing(path); err == nil {
		t.Fatal("a corrupt ring was accepted")
	}
	if b, _ := os.ReadFile(path); string(b) != "not a key\n" {
		t.Error("a corrupt ring was overwritten; it must be left for the operator")
	}
}
