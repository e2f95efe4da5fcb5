package memhttp

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/testwait"
)

func TestRoundTrip(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Method+" "+r.URL.Path+" "+r.Host)
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(append([]byte("got "), body...))
	})
	resp, err := Client(h).Post("http://svc.test/mcp", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Echo") != "POST /mcp svc.test" || string(b) != "got hello" {
		t.Errorf("%d %v %q", resp.StatusCode, resp.Header, b)
	}
}

// An event stream arrives event by event, and closing the body ends the
// handler's request context.
func TestStreamingAndClientGone(t *testing.T) {
	ended := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil {
			// A write returns once the client read it, and fails once it
			// closed the body.
			if _, err := io.WriteString(w, "data: tick\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				t.Errorf("Flush: %v", err)
			}
		}
	})
	resp, err := Client(h).Get("http://svc.test/events")
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	for range 3 { // three events before the handler ends: nothing waits for it
		if !lines.Scan() || lines.Text() != "data: tick" {
			t.Fatalf("event line %q", lines.Text())
		}
		lines.Scan() // the blank line
	}
	_ = resp.Body.Close()
	select {
	case <-ended:
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		t.Fatal("the handler did not end when the client closed the stream")
	}
}

func TestRequestContextEnds(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
	go cancel()
	if _, err := Client(h).Do(req); err == nil {
		t.Error("a cancelled request before any answer returned no error")
	}
}

// TestCancelledRequestNotSent: a request whose context already ended is
// not served, as over a socket; a handler that answers at once would
// otherwise race the cancellation, and sometimes win (so the test tries
// many times: without the check, about one try in seventy got an answer).
func TestCancelledRequestNotSent(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 1000 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
		if resp, err := (Transport{Handler: h}).RoundTrip(req); err == nil {
			resp.Body.Close()
			t.Fatal("a request cancelled before it was sent got an answer")
		}
	}
}
