package sessions

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultKeyRingFile is the name of the key ring the gateway keeps in its
// state directory when sessions.key_file names none.
const DefaultKeyRingFile = "session-keys"

// LoadOrCreateKeyRing reads the key ring at path, or, where there is no
// file yet, creates one with a single fresh 32-byte key (0600, in a 0700
// directory). It is how a gateway without sessions.key_file keeps the
// sessions it issued across a restart: hosts such as Claude Code never
// initialize again after a 404 on their session id. Two processes
// creating it at once agree on one ring: the file appears whole (a hard
// link of a finished temporary file), and the loser reads the winner's.
func LoadOrCreateKeyRing(path string) (keys [][]byte, created bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if created, err = createKeyRing(path); err != nil {
			return nil, false, err
		}
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, false, err
	}
	keys, err = ParseSessionKeys(data)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w (delete it to have a new one made; every session it sealed ends)", path, err)
	}
	return keys, created, nil
}

// createKeyRing writes a new ring at path unless one appears first; it
// reports whether this call made it.
func createKeyRing(path string) (bool, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("state directory: %w; set $STATE_DIRECTORY to a writable directory, or sessions.key_file", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, ".session-keys-*")
	if err != nil {
		return false, fmt.Errorf("state directory: %w; set $STATE_DIRECTORY to a writable directory, or sessions.key_file", err)
	}
	defer os.Remove(tmp.Name())
	content := "# mcpgw session key ring, made on first start; newest key first.\n" + base64.StdEncoding.EncodeToString(key) + "\n"
	if _, err := tmp.WriteString(content); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	// CreateTemp made it 0600. Link fails if the ring exists: never
	// replace a ring another process has begun to seal with.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
