package login

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// DefaultStateFile is the login state's name in the state directory.
const DefaultStateFile = "login-state.json"

// client is a registered client of the gateway.
type client struct {
	ID           string    `json:"client_id"`
	Name         string    `json:"client_name,omitempty"`
	RedirectURIs []string  `json:"redirect_uris"`
	Created      time.Time `json:"created"`
	LastUsed     time.Time `json:"last_used"`
	// Static clients come from login.clients; metadata clients from a
	// Client ID Metadata Document (kept in memory only). Neither expires
	// nor counts against max_clients.
	Static   bool `json:"-"`
	Metadata bool `json:"-"`
}

// consent is one user's remembered approval of one client.
type consent struct {
	Subject  string    `json:"sub"`
	ClientID string    `json:"client_id"`
	Resource string    `json:"resource"`
	Scopes   []string  `json:"scopes"`
	Granted  time.Time `json:"granted"`
}

// family is the refresh tokens descending from one authorization code.
// Only hashes of the tokens are kept.
type family struct {
	ID       string    `json:"id"`
	ClientID string    `json:"client_id"`
	Resource string    `json:"resource"`
	Scopes   []string  `json:"scopes"`
	User     User      `json:"user"`
	Current  string    `json:"current"` // hash of the refresh token in force
	Used     []string  `json:"used"`    // hashes of the ones it replaced (bounded)
	Expires  time.Time `json:"expires"`
}

// maxUsedPerFamily bounds the replaced tokens a family remembers for reuse
// detection: the most recent ones are those a thief would hold.
const maxUsedPerFamily = 32

// state is what survives restarts: clients, consents, refresh token
// families. It is kept in one JSON file, rewritten whole (atomically) on
// each change; every map in it is bounded by the config.
type state struct {
	Clients  map[string]*client `json:"clients"`
	Consents []*consent         `json:"consents"`
	Families map[string]*family `json:"families"`
}

// store guards the state and writes it through to path ("" keeps it in
// memory only).
type store struct {
	mu   sync.Mutex
	path string
	st   state
	// byRefresh finds a family by the hash of any of its tokens, current
	// or used.
	byRefresh map[string]string

	// The file is rewritten whole, so writes are coalesced: a change
	// comes to disk at once when the last write is flushEvery old, else
	// by a timer at most flushEvery later, with every change since. A
	// burst of refreshes costs one write a second, not one each; a crash
	// loses at most that second (those clients sign in again).
	now       func() time.Time
	lastWrite time.Time
	timer     *time.Timer
	onError   func(error) // a timed write that failed
	writes    int         // files written (tests)
}

// flushEvery is the least time between two writes of the state file.
const flushEvery = time.Second

func openStore(path string, now func() time.Time, onError func(error)) (*store, error) {
	s := &store{path: path, st: state{Clients: map[string]*client{}, Families: map[string]*family{}}, byRefresh: map[string]string{}, now: now, onError: onError}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("login state %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &s.st); err != nil {
		return nil, fmt.Errorf("login state %s: %w (move it away to start afresh: every client registers again and every user signs in again)", path, err)
	}
	if s.st.Clients == nil {
		s.st.Clients = map[string]*client{}
	}
	if s.st.Families == nil {
		s.st.Families = map[string]*family{}
	}
	for id, f := range s.st.Families {
		s.index(id, f)
	}
	return s, nil
}

func (s *store) index(id string, f *family) {
	s.byRefresh[f.Current] = id
	for _, u := range f.Used {
		s.byRefresh[u] = id
	}
}

func (s *store) unindex(f *family) {
	delete(s.byRefresh, f.Current)
	for _, u := range f.Used {
		delete(s.byRefresh, u)
	}
}

// save brings the state to disk, now or within flushEvery (see store);
// the caller holds mu. A failed immediate write is returned: the change
// it would have kept is then refused, so that what a client holds never
// outlives a restart silently.
func (s *store) save() error {
	if s.path == "" || s.timer != nil {
		return nil // in memory, or a write is due that will include this change
	}
	if wait := flushEvery - s.now().Sub(s.lastWrite); wait > 0 {
		s.timer = time.AfterFunc(wait, s.flush)
		return nil
	}
	return s.write()
}

// flush is the timed write.
func (s *store) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer == nil {
		return // close wrote it
	}
	s.timer = nil
	if err := s.write(); err != nil && s.onError != nil {
		s.onError(err)
	}
}

// close writes what a timer would have.
func (s *store) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer == nil {
		return nil
	}
	s.timer.Stop()
	s.timer = nil
	return s.write()
}

// write writes the file; the caller holds mu.
func (s *store) write() error {
	data, err := json.Marshal(&s.st)
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".login-state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return err
	}
	s.lastWrite = s.now()
	s.writes++
	return nil
}

// hashToken is how refresh tokens and codes are kept: never in clear.
func hashToken(t string) string {
	h := sha256.Sum256([]byte(t))
	return hex.EncodeToString(h[:])
}

// counts are the sizes of the state, for the metrics.
func (s *store) counts() (clients, consents, families int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.st.Clients), len(s.st.Consents), len(s.st.Families)
}

// sweep drops expired families and dynamic clients unused for idle; the
// caller holds mu.
func (s *store) sweep(now time.Time, idle time.Duration) bool {
	changed := false
	for id, f := range s.st.Families {
		if now.After(f.Expires) {
			s.unindex(f)
			delete(s.st.Families, id)
			changed = true
		}
	}
	for id, c := range s.st.Clients {
		if now.Sub(c.LastUsed) > idle {
			delete(s.st.Clients, id)
			changed = true
		}
	}
	return changed
}

// trimUser ends sub's oldest refresh token families until at most keep
// remain (login.max_grants_per_user): a user who signs in without end
// ends their own oldest grants rather than filling login.max_grants for
// everyone. The caller holds mu.
func (s *store) trimUser(sub string, keep int) {
	var mine []*family
	for _, f := range s.st.Families {
		if f.User.Subject == sub {
			mine = append(mine, f)
		}
	}
	if len(mine) <= keep {
		return
	}
	slices.SortFunc(mine, func(a, b *family) int { return a.Expires.Compare(b.Expires) })
	for _, f := range mine[:len(mine)-keep] {
		s.unindex(f)
		delete(s.st.Families, f.ID)
	}
}

// findConsent returns the user's consent to client for resource covering
// scopes; the caller holds mu.
func (s *store) findConsent(sub, clientID, resource string, scopes []string) *consent {
	for _, c := range s.st.Consents {
		if c.Subject == sub && c.ClientID == clientID && c.Resource == resource && containsAll(c.Scopes, scopes) {
			return c
		}
	}
	return nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
