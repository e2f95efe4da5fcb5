package host_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/demo"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// TestHTTPUpstreamEjectedAndRecovers: an HTTP upstream that stops
// answering is found by the health probes, ejected (calls fail fast with a
// clear error instead of hanging) and taken back once it answers again.
func TestHTTPUpstreamEjectedAndRecovers(t *testing.T) {
	var hang atomic.Bool
	release := make(chan struct{}) // lets a hung request go when the test ends
	srv := demo.Server("test")
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select { // a server that stopped answering
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	defer ts.Close()
	defer close(release) // before ts.Close, which waits for the handlers

	cfg, err := config.Parse("t.yaml", []byte("upstreams:\n  web:\n    url: "+ts.URL+"\n    timeout: 200ms\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := host.New(cfg, host.Options{
		Logger:         zaptest.NewLogger(t),
		HealthInterval: 40 * time.Millisecond,
		HealthTimeout:  40 * time.Millisecond,
		HealthFailures: 2,
		MinBackoff:     20 * time.Millisecond,
		MaxBackoff:     50 * time.Millisecond,
	})
	h.Start()
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	u := h.Upstream("web")
	state := func() host.State { s, _ := u.State(); return s }
	if s := state(); s != host.StateReady {
		t.Fatalf("state %s, want ready", s)
	}

	hang.Store(true)
	waitFor(t, 3*time.Second, "the hung upstream to be ejected", func() bool { return state() != host.StateReady })
	_, lastErr := u.State()
	if lastErr == nil {
		t.Error("an ejected upstream should say why")
	}
	// Failing fast is failing before the caller's context ends: a Client
	// that waited for the upstream would take all of testwait.Long. The
	// bound is far from both, so a loaded machine cannot cross it.
	long, cancelLong := context.WithTimeout(context.Background(), testwait.Long)
	defer cancelLong()
	start := time.Now()
	if _, err := u.Client(long); err == nil {
		t.Error("an ejected upstream must not hand out a client")
	} else if d := time.Since(start); d > testwait.Long/6 {
		t.Errorf("calls to an ejected upstream took %s to fail; they must fail fast, not wait for the upstream", d)
	}

	hang.Store(false)
	waitFor(t, 5*time.Second, "the upstream to come back", func() bool { return state() == host.StateReady })
}
