package host_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// watcher is an Extension that counts the connection changes it hears of.
type watcher struct{ changes atomic.Int64 }

func (w *watcher) ConnectionChanged() { w.changes.Add(1) }

// TestExtension: an upstream's and the host's Extension are made once and
// kept, and an upstream's ConnectionWatcher hears of its state changes
// (here: a connection that cannot be made), which is how the catalog drops
// what it cached of a connection.
func TestExtension(t *testing.T) {
	cfg := &config.Config{Upstreams: map[string]*config.Upstream{"up": {Protocol: "legacy"}}}
	h := host.New(cfg, host.Options{
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		Transport: func(string) (client.Transport, error) { return nil, errors.New("no upstream here") },
	})
	defer h.Close()

	made := 0
	mk := func() host.Extension { made++; return &watcher{} }
	u := h.Upstream("up")
	w, ok := u.Extension(mk).(*watcher)
	if !ok || u.Extension(mk) != host.Extension(w) || made != 1 {
		t.Fatalf("upstream Extension made %d times, not kept", made)
	}
	hostExt := h.Extension(func() host.Extension { return "host-wide" })
	if hostExt != "host-wide" || h.Extension(func() host.Extension { return "other" }) != "host-wide" {
		t.Fatalf("host Extension = %v, not kept", hostExt)
	}
	if u.Extension(mk) == hostExt {
		t.Fatal("the host's and an upstream's Extension are one slot")
	}

	h.Start()
	testwait.Until(t, "the watcher to hear of a connection change after a failed connection", func() bool { return w.changes.Load() != 0 })
	if s, _ := u.State(); s == host.StateReady {
		t.Fatalf("state %s after a failed connection", s)
	}
}
