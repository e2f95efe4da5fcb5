package host_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/demo"
	"github.com/mcpgw/mcpgw/internal/host"
)

// memSessions is an UpstreamSessions in memory, shared by the hosts of a
// test; blind hides records from Load (a replica that looked before the
// other saved).
type memSessions struct {
	mu    sync.Mutex
	recs  map[string]host.UpstreamSession
	blind bool
}

func (m *memSessions) Load(_ context.Context, s, u string) (host.UpstreamSession, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[s+"/"+u]
	return r, ok && !m.blind, nil
}

func (m *memSessions) Save(_ context.Context, s, u string, rec host.UpstreamSession, replacing string) (host.UpstreamSession, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recs[s+"/"+u]; ok && (replacing == "" || (r.ID != replacing && r.StdioReplica != replacing)) {
		return r, false, nil
	}
	m.recs[s+"/"+u] = rec
	return rec, true, nil
}

func (m *memSessions) Forget(s, u, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.recs[s+"/"+u]; r.ID == id || r.StdioReplica == id {
		delete(m.recs, s+"/"+u)
	}
}

func (m *memSessions) setBlind(b bool) {
	m.mu.Lock()
	m.blind = b
	m.mu.Unlock()
}

func (m *memSessions) Touch(string, string)        {}
func (m *memSessions) RefreshEvery() time.Duration { return time.Minute }

// TestFleetSessionsRace: two replicas open a session's stateful upstream
// connection at once (the second looked before the first saved): the
// first record stands, the second ends the upstream session it made
// (DELETE) and continues the first's, so both send the same id.
func TestFleetSessionsRace(t *testing.T) {
	srv := demo.Server("test")
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var mu sync.Mutex
	deleted := map[string]bool{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			mu.Lock()
			deleted[r.Header.Get("Mcp-Session-Id")] = true
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	store := &memSessions{recs: map[string]host.UpstreamSession{}}
	replica := func(id string) *host.Upstream {
		cfg := &config.Config{Separator: "__", Upstreams: map[string]*config.Upstream{"st": {URL: ts.URL, Stateful: true, Protocol: "legacy"}}}
		hst := host.New(cfg, host.Options{Logger: zaptest.NewLogger(t), UpstreamSessions: store, ReplicaID: id})
		hst.Start()
		t.Cleanup(hst.Close)
		return hst.Upstream("st")
	}
	a, b := replica("A"), replica("B")
	ctx, cancel := context.WithTimeout(host.WithSession(context.Background(), "sess"), 10*time.Second)
	defer cancel()

	ca, err := a.ClientFor(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	store.setBlind(true) // B looks before A's record is there
	cb, err := b.ClientFor(ctx, true)
	store.setBlind(false)
	if err != nil {
		t.Fatal(err)
	}
	if ca.SessionID() == "" || cb.SessionID() != ca.SessionID() {
		t.Fatalf("A's upstream session %q, B's %q: want B to continue A's", ca.SessionID(), cb.SessionID())
	}
	mu.Lock()
	n := len(deleted)
	mu.Unlock()
	if n != 1 || deleted[ca.SessionID()] {
		t.Errorf("upstream sessions DELETEd: %v, want exactly B's own (not A's %s)", deleted, ca.SessionID())
	}
	if _, err := cb.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{"text":"x"}}`), client.CallOptions{}); err != nil {
		t.Errorf("a call on B's continued session: %v", err)
	}
}
