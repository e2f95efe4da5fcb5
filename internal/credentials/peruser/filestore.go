package peruser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// FileBackend keeps records in one JSON file (mode 0600, in a 0700
// directory), rewritten whole and renamed into place on every change, so
// a crash leaves the old file or the new one. Changes take an advisory
// lock (flock on PATH.lock) and read the file again first, so `mcpgw
// tokens revoke` run beside a gateway is neither lost nor undone; reads
// see another process's change as soon as the file's identity changes.
type FileBackend struct {
	path  string
	max   int
	clock func() time.Time
	sync  func(*os.File) error // (*os.File).Sync; tests make it fail

	mu      sync.Mutex
	stamp   fileStamp
	entries map[string]fileEntry
}

type fileEntry struct {
	Value   string `json:"v"`           // base64 of the sealed record
	Expires int64  `json:"x,omitempty"` // unix seconds; 0: never
}

type fileDoc struct {
	Version int                  `json:"version"`
	Records map[string]fileEntry `json:"records"`
}

// fileStamp identifies one version of the file.
type fileStamp struct {
	ino   uint64
	mtime int64
	size  int64
}

// OpenFile opens (creating its directory) the token file at path, holding
// at most max records.
func OpenFile(path string, max int, clock func() time.Time) (*FileBackend, error) {
	if clock == nil {
		clock = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("token store %s: %w; create the directory, or set store.file", path, err)
	}
	f := &FileBackend{path: path, max: max, clock: clock, sync: (*os.File).Sync}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

func stampOf(fi fs.FileInfo) fileStamp {
	s := fileStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
	if st, ok := fi.Sys().(*unix.Stat_t); ok {
		s.ino = st.Ino
	}
	return s
}

// reload reads the file if it changed since it was last read. f.mu held.
func (f *FileBackend) reload() error {
	fi, err := os.Stat(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		f.entries, f.stamp = map[string]fileEntry{}, fileStamp{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("token store %s: %w", f.path, err)
	}
	st := stampOf(fi)
	if f.entries != nil && st == f.stamp {
		return nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("token store %s: %w", f.path, err)
	}
	var doc fileDoc
	if err := json.Unmarshal(data, &doc); err != nil || doc.Version != 1 {
		return fmt.Errorf("token store %s: not a token file of this version (%v); move it away (its users authorize again)", f.path, err)
	}
	if doc.Records == nil {
		doc.Records = map[string]fileEntry{}
	}
	f.entries, f.stamp = doc.Records, st
	return nil
}

// change runs fn on the current records under the file lock and writes
// the result.
func (f *FileBackend) change(fn func(now int64) (bool, error)) error {
	lock, err := os.OpenFile(f.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("token store %s: %w", f.path, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("token store %s: lock: %w", f.path, err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN) //nolint:errcheck // closing unlocks too
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(); err != nil {
		return err
	}
	now := f.clock().Unix()
	for k, e := range f.entries { // expired records go with any change
		if e.Expires != 0 && e.Expires <= now {
			delete(f.entries, k)
		}
	}
	write, err := fn(now)
	if err != nil || !write {
		return err
	}
	if err := f.write(); err != nil {
		f.entries = nil // fn's change did not land: read the file again
		return err
	}
	return nil
}

// write replaces the file with the records. f.mu held.
func (f *FileBackend) write() error {
	data, err := json.Marshal(fileDoc{Version: 1, Records: f.entries})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("token store %s: %w", f.path, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; left only on failure
	// One err throughout: a failed chmod, write or sync must stop the
	// rename, or a short file would replace every user's tokens.
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = f.sync(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		return fmt.Errorf("token store %s: %w", f.path, err)
	}
	if fi, err := os.Stat(f.path); err == nil {
		f.stamp = stampOf(fi)
	}
	return nil
}

// Get implements Backend.
func (f *FileBackend) Get(_ context.Context, key string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(); err != nil {
		return nil, false, err
	}
	e, ok := f.entries[key]
	if !ok || e.Expires != 0 && e.Expires <= f.clock().Unix() {
		return nil, false, nil
	}
	v, err := base64.StdEncoding.DecodeString(e.Value)
	if err != nil {
		return nil, false, nil
	}
	return v, true, nil
}

// Put implements Backend.
func (f *FileBackend) Put(_ context.Context, key string, val []byte, expires time.Time) error {
	return f.change(func(int64) (bool, error) {
		if _, held := f.entries[key]; !held && len(f.entries) >= f.max {
			return false, ErrFull
		}
		e := fileEntry{Value: base64.StdEncoding.EncodeToString(val)}
		if !expires.IsZero() {
			e.Expires = expires.Unix()
		}
		f.entries[key] = e
		return true, nil
	})
}

// Delete implements Backend.
func (f *FileBackend) Delete(_ context.Context, key string) (bool, error) {
	held := false
	err := f.change(func(int64) (bool, error) {
		_, held = f.entries[key]
		delete(f.entries, key)
		return held, nil
	})
	return held, err
}

// DeleteIf implements Backend.
func (f *FileBackend) DeleteIf(_ context.Context, key string, val []byte) (bool, error) {
	held := false
	want := base64.StdEncoding.EncodeToString(val)
	err := f.change(func(int64) (bool, error) {
		e, ok := f.entries[key]
		if held = ok && e.Value == want; held {
			delete(f.entries, key)
		}
		return held, nil
	})
	return held, err
}

// Clear implements Backend.
func (f *FileBackend) Clear(context.Context) (int, error) {
	n := 0
	err := f.change(func(int64) (bool, error) {
		n = len(f.entries)
		clear(f.entries)
		return true, nil
	})
	return n, err
}

// Len implements Backend.
func (f *FileBackend) Len(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(); err != nil {
		return 0, err
	}
	return len(f.entries), nil
}
