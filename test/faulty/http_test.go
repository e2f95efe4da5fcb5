package faulty

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

type httpPeer struct {
	t   *testing.T
	url string
	h   *HTTPHandler
	srv *Server
}

func startHTTP(t *testing.T, opts Options) *httpPeer {
	t.Helper()
	srv := NewServer(opts)
	h := srv.HTTP()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &httpPeer{t: t, url: ts.URL, h: h, srv: srv}
}

func (p *httpPeer) do(ctx context.Context, method, session, body string, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.url, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set(mcp.HeaderSessionID, session)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return http.DefaultClient.Do(req)
}

func (p *httpPeer) initialize() string {
	p.t.Helper()
	resp, err := p.do(context.Background(), http.MethodPost, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get(mcp.HeaderSessionID)
	if resp.StatusCode != http.StatusOK || id == "" {
		p.t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, id)
	}
	return id
}

func callBody(id int, f Fault, progress string) string {
	b, _ := jsonrpc.Encode(jsonrpc.NewRequest(jsonrpc.IntID(int64(id)), "tools/call", f.CallParams("", progress)))
	return string(b)
}

// events reads an SSE body to its end.
func events(t *testing.T, body io.Reader) ([]sse.Event, error) {
	t.Helper()
	rd := sse.NewReader(body, 64<<20)
	var out []sse.Event
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

// answerIn returns the response among evs.
func answerIn(evs []sse.Event) *jsonrpc.Message {
	for _, ev := range evs {
		if m, err := jsonrpc.Parse(ev.Data); err == nil && m.Kind() == jsonrpc.KindResponse {
			return m
		}
	}
	return nil
}

// Each answering fault answers on the call's SSE stream with its token,
// after what it was scripted to send.
func TestHTTPAnsweringFaults(t *testing.T) {
	tests := []struct {
		fault      Fault
		progress   string
		wantBefore int // data events before the answer
	}{
		{Fault{Kind: Echo, Token: "e"}, "", 0},
		{Fault{Kind: Slow, Token: "s", Delay: 40 * time.Millisecond, Events: 2}, "p", 2},
		{Fault{Kind: Garbage, Token: "g", Bytes: 50}, "", 4},
		{Fault{Kind: Huge, Token: "h", Bytes: 1 << 20}, "", 0},
		{Fault{Kind: Stderr, Token: "st", Bytes: 10}, "", 0},
		{Fault{Kind: ListChanged, Token: "lc"}, "", 0},
		{Fault{Kind: Grandchild, Token: "gc"}, "", 0},
	}
	for _, tt := range tests {
		t.Run(string(tt.fault.Kind), func(t *testing.T) {
			p := startHTTP(t, Options{})
			sess := p.initialize()
			resp, err := p.do(context.Background(), http.MethodPost, sess, callBody(1, tt.fault, tt.progress))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != mcp.ContentTypeEventStream {
				t.Fatalf("Content-Type %q, want an event stream", ct)
			}
			evs, err := events(t, resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var data []sse.Event
			for _, ev := range evs {
				if len(ev.Data) > 0 {
					data = append(data, ev)
				}
			}
			if len(data) != tt.wantBefore+1 {
				t.Fatalf("got %d data events, want %d and the answer", len(data), tt.wantBefore)
			}
			m, err := jsonrpc.Parse(data[len(data)-1].Data)
			if err != nil || string(m.ID) != "1" {
				t.Fatalf("last event is not the answer: %s (%v)", data[len(data)-1].Data, err)
			}
			if got := tokenOf(t, m); got != tt.fault.Token {
				t.Errorf("token %q, want %q", got, tt.fault.Token)
			}
		})
	}
}

// Without SSE in Accept, a call is answered with one JSON body.
func TestHTTPJSONAnswer(t *testing.T) {
	p := startHTTP(t, Options{})
	sess := p.initialize()
	resp, err := p.do(context.Background(), http.MethodPost, sess, callBody(1, Fault{Kind: Slow, Token: "j", Events: 2, Delay: 10 * time.Millisecond}, "p"), "Accept", "application/json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m, err := jsonrpc.Parse(body)
	if err != nil || resp.Header.Get("Content-Type") != mcp.ContentTypeJSON {
		t.Fatalf("answer %q (%s): %v", body, resp.Header.Get("Content-Type"), err)
	}
	if tokenOf(t, m) != "j" {
		t.Errorf("answer %s", body)
	}
}

// expire forgets the session: the request and the next ones on it get
// 404; the same call on a new session (a client's retry) is answered.
func TestHTTPExpire(t *testing.T) {
	p := startHTTP(t, Options{})
	sess := p.initialize()
	for _, body := range []string{callBody(1, Fault{Kind: Expire, Token: "x"}, ""), `{"jsonrpc":"2.0","id":2,"method":"ping"}`} {
		resp, err := p.do(context.Background(), http.MethodPost, sess, body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: HTTP %d, want 404", body, resp.StatusCode)
		}
	}
	sess2 := p.initialize()
	resp, err := p.do(context.Background(), http.MethodPost, sess2, callBody(3, Fault{Kind: Expire, Token: "x"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs, _ := events(t, resp.Body)
	if m := answerIn(evs); m == nil || tokenOf(t, m) != "x" {
		t.Errorf("the retry on a new session was not answered: %+v", evs)
	}
}

// crash aborts every call in flight (their connections close without an
// answer) and forgets every session.
func TestHTTPCrash(t *testing.T) {
	p := startHTTP(t, Options{})
	a, b := p.initialize(), p.initialize()
	hung := make(chan error, 1)
	go func() {
		resp, err := p.do(context.Background(), http.MethodPost, b, callBody(1, Fault{Kind: Hang, Token: "h"}, ""))
		if err != nil {
			hung <- err
			return
		}
		defer resp.Body.Close()
		evs, err := events(t, resp.Body)
		if m := answerIn(evs); m != nil {
			err = errors.New("the hung call was answered")
		}
		hung <- err
	}()
	testwait.Until(t, "the hung call to be served", func() bool { return p.srv.Served(Hang) != 0 })
	_, err := p.do(context.Background(), http.MethodPost, a, callBody(2, Fault{Kind: Crash, Token: "c"}, ""))
	if err == nil {
		t.Error("the crash call got an HTTP answer; want the connection closed")
	}
	select {
	case err := <-hung:
		if err == nil {
			t.Error("the hung call's stream ended cleanly; want it cut by the crash")
		}
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		t.Fatal("the hung call outlived the crash")
	}
	if n := p.h.Sessions(); n != 0 {
		t.Errorf("%d sessions after the crash, want 0", n)
	}
	resp, err := p.do(context.Background(), http.MethodPost, a, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("old session after the crash: HTTP %d, want 404", resp.StatusCode)
	}
}

// reset closes the connection after reading the request.
func TestHTTPReset(t *testing.T) {
	p := startHTTP(t, Options{})
	sess := p.initialize()
	resp, err := p.do(context.Background(), http.MethodPost, sess, callBody(1, Fault{Kind: Reset, Token: "r", Delay: 5 * time.Millisecond}, ""))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got HTTP %d; want the connection reset", resp.StatusCode)
	}
	if p.srv.Served(Reset) != 1 {
		t.Errorf("the request was not read before the reset")
	}
}

// drop cuts its stream after a priming event and Events notifications; a
// GET with Last-Event-ID gets the answer once, unless NoResume threw it away.
func TestHTTPDropAndResume(t *testing.T) {
	for _, noResume := range []bool{false, true} {
		p := startHTTP(t, Options{})
		sess := p.initialize()
		resp, err := p.do(context.Background(), http.MethodPost, sess, callBody(1, Fault{Kind: Drop, Token: "d", Events: 3, NoResume: noResume}, "pt"))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := events(t, resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 4 || answerIn(evs) != nil {
			t.Fatalf("cut stream: %d events (want priming + 3, no answer): %+v", len(evs), evs)
		}
		last := evs[len(evs)-1].ID
		for i, want := range []int{http.StatusOK, http.StatusBadRequest} {
			if noResume && i == 0 {
				want = http.StatusBadRequest
			}
			resp, err := p.do(context.Background(), http.MethodGet, sess, "", "Last-Event-ID", last)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != want {
				t.Errorf("no_resume=%v: resume %d: HTTP %d, want %d", noResume, i, resp.StatusCode, want)
			}
			if resp.StatusCode == http.StatusOK {
				evs, _ := events(t, resp.Body)
				if m := answerIn(evs); m == nil || tokenOf(t, m) != "d" || string(m.ID) != "1" {
					t.Errorf("resumed stream: %+v", evs)
				}
			}
			resp.Body.Close()
		}
	}
}

// A hung call answers nothing and outlives notifications/cancelled: only
// the client closing the connection ends it. A slow call's cancellation ends
// its stream without an answer. list_changed reaches the GET stream.
func TestHTTPHangCancelAndListChanged(t *testing.T) {
	p := startHTTP(t, Options{})
	sess := p.initialize()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get, err := p.do(ctx, http.MethodGet, sess, "")
	if err != nil || get.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", get, err)
	}
	defer get.Body.Close()

	hangCtx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	type result struct {
		evs []sse.Event
		err error
	}
	hung, slow := make(chan result, 1), make(chan result, 1)
	for _, c := range []struct {
		ctx  context.Context
		body string
		out  chan result
	}{
		{hangCtx, callBody(1, Fault{Kind: Hang, Token: "h"}, ""), hung},
		{context.Background(), callBody(2, Fault{Kind: Slow, Token: "s", Delay: time.Minute}, ""), slow},
	} {
		go func() {
			resp, err := p.do(c.ctx, http.MethodPost, sess, c.body)
			if err != nil {
				c.out <- result{err: err}
				return
			}
			defer resp.Body.Close()
			evs, err := events(t, resp.Body)
			c.out <- result{evs, err}
		}()
	}
	testwait.Until(t, "the hung and the slow call to be in flight", func() bool {
		return p.srv.Served(Hang) != 0 && p.srv.Served(Slow) != 0 && p.h.InFlight() >= 2
	})
	for _, id := range []string{"1", "2"} {
		resp, err := p.do(context.Background(), http.MethodPost, sess, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`}}`)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("cancel: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	select {
	case r := <-slow:
		if r.err != nil || answerIn(r.evs) != nil {
			t.Errorf("cancelled slow call: %+v %v; want its stream ended without an answer", r.evs, r.err)
		}
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		t.Fatal("the cancelled slow call's stream stayed open")
	}
	select {
	case r := <-hung:
		t.Fatalf("the hung call ended on notifications/cancelled: %+v %v", r.evs, r.err)
	case <-time.After(200 * time.Millisecond): // a negative check: a wait cut short only misses a failure
	}
	hangUp()
	<-hung
	testwait.Until(t, "the hung call's handler to end with its connection", func() bool { return p.h.InFlight() == 0 })

	resp, err := p.do(context.Background(), http.MethodPost, sess, callBody(3, Fault{Kind: ListChanged, Token: "lc"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rd := sse.NewReader(get.Body, 1<<20)
	ev, err := rd.Next()
	if err != nil || !bytes.Contains(ev.Data, []byte(`"notifications/tools/list_changed"`)) {
		t.Errorf("GET stream after list_changed: %q %v", ev.Data, err)
	}
	if p.srv.Generation() != 1 {
		t.Errorf("generation %d, want 1", p.srv.Generation())
	}
}

// Sessions idle past the TTL, deleted or never made are 404.
func TestHTTPSessionEnds(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := startHTTP(t, Options{SessionTTL: time.Minute, Now: clock})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	status := func(method, sess, body string) int {
		resp, err := p.do(context.Background(), method, sess, body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	idle := p.initialize()
	deleted := p.initialize()
	if got := status(http.MethodDelete, deleted, ""); got != http.StatusNoContent {
		t.Errorf("DELETE: HTTP %d", got)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	for name, sess := range map[string]string{"idle past the TTL": idle, "deleted": deleted, "unknown": "nope"} {
		if got := status(http.MethodPost, sess, ping); got != http.StatusNotFound {
			t.Errorf("%s: HTTP %d, want 404", name, got)
		}
	}
	if got := status(http.MethodPost, "", ping); got != http.StatusBadRequest {
		t.Errorf("no session header: HTTP %d, want 400", got)
	}
	fresh := p.initialize()
	if got := status(http.MethodPost, fresh, ping); got != http.StatusOK {
		t.Errorf("fresh session: HTTP %d", got)
	}
}

// Beyond MaxSessions the least recently used session is forgotten.
func TestHTTPMaxSessions(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now }
	p := startHTTP(t, Options{MaxSessions: 2, Now: clock})
	first := p.initialize()
	p.initialize()
	p.initialize()
	if n := p.h.Sessions(); n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
	resp, err := p.do(context.Background(), http.MethodPost, first, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("evicted session: HTTP %d, want 404", resp.StatusCode)
	}
}
