package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/testwait"
)

// server is a loopback HTTP server that counts the connections it accepts.
type server struct {
	*httptest.Server
	conns atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc, configure ...func(*http.Server)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	for _, f := range configure {
		f(s.Config)
	}
	also := s.Config.ConnState
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
		if also != nil {
			also(c, st)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newTransport(t *testing.T) *Transport {
	t.Helper()
	fb := http.DefaultTransport.(*http.Transport).Clone()
	tr := New(fb)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// post is a POST of body to u, with GetBody as the client sets it.
func post(ctx context.Context, u, body string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	return req
}

func roundTrip(t *testing.T, tr http.RoundTripper, req *http.Request) (int, string) {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp.StatusCode, string(b)
}

// echo answers a POST with its body, as JSON (Content-Length) or, with
// ?chunked, as a flushed stream (chunked), as MCP servers answer.
func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.URL.Query().Has("chunked") {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "data: end\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func TestReuse(t *testing.T) {
	for _, tc := range []struct{ name, query string }{{"content-length", ""}, {"chunked", "?chunked"}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, echo)
			tr := newTransport(t)
			for i := range 20 {
				msg := fmt.Sprintf(`{"n":%d}`, i)
				code, got := roundTrip(t, tr, post(t.Context(), srv.URL+tc.query, msg))
				if code != 200 || !strings.Contains(got, msg) {
					t.Fatalf("call %d: %d %q", i, code, got)
				}
			}
			if n := srv.conns.Load(); n != 1 {
				t.Errorf("server saw %d connections for 20 calls in turn, want 1", n)
			}
			if st := tr.Stats(); st.Opened != 1 || st.Reused != 19 {
				t.Errorf("stats %+v, want 1 opened, 19 reused", st)
			}
		})
	}
}

// TestConcurrent runs calls from many goroutines over one transport (run
// with -race): every answer is its own call's, and the connections do not
// outnumber the callers.
func TestConcurrent(t *testing.T) {
	srv := newServer(t, echo)
	tr := newTransport(t)
	tr.Fallback.MaxIdleConnsPerHost = 16 // net/http's default keeps 2
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				msg := fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)
				q := ""
				if i%2 == 1 {
					q = "?chunked"
				}
				resp, err := tr.RoundTrip(post(t.Context(), srv.URL+q, msg))
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !strings.Contains(string(b), msg) {
					errs <- fmt.Errorf("call %s: %q, %v", msg, b, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := srv.conns.Load(); n > 16 {
		t.Errorf("%d connections for 16 callers", n)
	}
}

// TestServerClosedIdle: a kept connection the server closed while idle is
// not written on; the call goes on a new one and succeeds.
func TestServerClosedIdle(t *testing.T) {
	closed := make(chan struct{}, 1)
	srv := newServer(t, echo, func(s *http.Server) {
		s.IdleTimeout = 20 * time.Millisecond
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				select {
				case closed <- struct{}{}:
				default: // a later close (at the test's end) must not block the server
				}
			}
		}
	})
	tr := newTransport(t)
	roundTrip(t, tr, post(t.Context(), srv.URL, "1"))
	testwait.Recv(t, closed, "the server to close the idle connection")
	if code, got := roundTrip(t, tr, post(t.Context(), srv.URL, "2")); code != 200 || got != "2" {
		t.Fatalf("after the server closed the kept connection: %d %q", code, got)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("server saw %d connections, want 2", n)
	}
}

// TestUnaskedBytes: a server that sent more than its answer's length has
// a connection whose next read would be garbage: it is not reused.
func TestUnaskedBytes(t *testing.T) {
	extra := make(chan struct{}, 2)
	addr, accepted := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			// The behaviour under test: bytes after the answer was read,
			// which only a look at the socket sees. (Sent sooner, they only
			// arrive with the answer: found all the same.)
			time.Sleep(5 * time.Millisecond)
			io.WriteString(c, "EXTRA")
			extra <- struct{}{} // on loopback they are at the client once written
		}
	})
	tr := newTransport(t)
	for i := range 2 {
		if code, got := roundTrip(t, tr, post(t.Context(), "http://"+addr, "x")); code != 200 || got != "ok" {
			t.Fatalf("call %d: %d %q", i, code, got)
		}
		testwait.Recv(t, extra, "the extra bytes to be sent")
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("server saw %d connections, want 2 (the first one had bytes nobody asked for)", n)
	}
}

// TestInformational: a 1xx answer before the real one is skipped.
func TestInformational(t *testing.T) {
	addr, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")
	})
	tr := newTransport(t)
	if code, got := roundTrip(t, tr, post(t.Context(), "http://"+addr, "x")); code != 200 || got != "done" {
		t.Fatalf("%d %q, want 200 done", code, got)
	}
}

// TestStalePostNotSent: a POST on a kept connection that its server closes
// after reading it (a crash, a race with its idle timeout) is answered with
// the error, not sent again: the server may have acted on it. A GET is
// sent again.
func TestStalePostNotSent(t *testing.T) {
	var seen sync.Map // method → count
	addr, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for n := 0; ; n++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			v, _ := seen.LoadOrStore(req.Method, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			if n == 1 {
				return // read the second request, then close without a word
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	count := func(m string) int64 {
		v, ok := seen.Load(m)
		if !ok {
			return 0
		}
		return v.(*atomic.Int64).Load()
	}
	tr := newTransport(t)
	u := "http://" + addr
	roundTrip(t, tr, post(t.Context(), u, "1"))
	if _, err := tr.RoundTrip(post(t.Context(), u, "2")); err == nil {
		t.Fatal("a POST the server closed on after reading it succeeded")
	} else if !strings.Contains(err.Error(), "closed by the server") {
		t.Errorf("error %q does not say the server closed the connection", err)
	}
	if n := count(http.MethodPost); n != 2 {
		t.Errorf("server read %d POSTs, want 2 (the second not sent again)", n)
	}

	get := func() *http.Request {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		return req
	}
	roundTrip(t, tr, get())
	if code, _ := roundTrip(t, tr, get()); code != 200 {
		t.Fatalf("GET sent again: %d", code)
	}
	if n := count(http.MethodGet); n != 3 {
		t.Errorf("server read %d GETs, want 3 (the second sent again)", n)
	}
}

// rawServer accepts loopback connections and serves each with fn; it
// reports how many it accepted.
func rawServer(t *testing.T, fn func(net.Conn, *bufio.Reader)) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	// Cleanup closes the accepted connections too: a handler waiting
	// for a request the client will never send must not hold the test.
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				fn(c, bufio.NewReader(c))
			})
		}
	})
	return ln.Addr().String(), &n
}

// hanging answers with a header and one event, then holds the stream
// open until the request ends.
func hanging(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, "data: first\n\n")
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// TestCancelEndsBody: cancelling the request's context ends a body read
// blocked on its stream, with the context's error, and the connection is
// not kept.
func TestCancelEndsBody(t *testing.T) {
	srv := newServer(t, hanging)
	tr := newTransport(t)
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := tr.RoundTrip(post(ctx, srv.URL, "x"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || !bytes.Contains(buf[:n], []byte("first")) {
		t.Fatalf("first read: %q %v", buf[:n], err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %s to end the read", d)
	}
	resp.Body.Close()
	if tr.nidle != 0 {
		t.Errorf("a cancelled stream's connection was kept")
	}
}

// TestCloseEndsRead: closing a body ends a read blocked on it in another
// goroutine (how a stream is abandoned), and the connection is dropped.
func TestCloseEndsRead(t *testing.T) {
	srv := newServer(t, hanging)
	tr := newTransport(t)
	resp, err := tr.RoundTrip(post(t.Context(), srv.URL, "x"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	// The read is (most likely) blocked by now; one that is not yet ends
	// at once all the same, so load cannot make this fail.
	time.Sleep(50 * time.Millisecond)
	resp.Body.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a read ended by Close reported the body's end")
		}
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		t.Fatal("Close did not end the blocked read")
	}
	if tr.nidle != 0 {
		t.Errorf("%d idle connections after an abandoned stream", tr.nidle)
	}
}

// TestEarlyClose: a body closed before its end does not leave its
// connection to the next request (its rest would be read as the answer).
func TestEarlyClose(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write(bytes.Repeat([]byte("a"), 64<<10))
	})
	tr := newTransport(t)
	resp, err := tr.RoundTrip(post(t.Context(), srv.URL, "x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close()
	if code, got := roundTrip(t, tr, post(t.Context(), srv.URL, "y")); code != 200 || len(got) != 64<<10 {
		t.Fatalf("next call: %d, %d bytes", code, len(got))
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("server saw %d connections, want 2", n)
	}
}

// TestConnectionClose: an answer that says Connection: close (or a
// request that asks it) leaves nothing kept.
func TestConnectionClose(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Query().Has("close") {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	})
	tr := newTransport(t)
	roundTrip(t, tr, post(t.Context(), srv.URL+"?close", "x"))
	req := post(t.Context(), srv.URL, "x")
	req.Close = true
	roundTrip(t, tr, req)
	roundTrip(t, tr, post(t.Context(), srv.URL, "x"))
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("server saw %d connections, want 3", n)
	}
}

func TestResponseHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	tr := newTransport(t)
	tr.Fallback.ResponseHeaderTimeout = 100 * time.Millisecond
	_, err := tr.RoundTrip(post(t.Context(), srv.URL, "x"))
	if err == nil || !strings.Contains(err.Error(), "no response header within 100ms") {
		t.Fatalf("err %v, want the header timeout named", err)
	}
}

// TestHeaderTimeoutNotOnBody: the header timeout bounds the wait for the
// header only; a stream may then stay quiet for longer.
func TestHeaderTimeoutNotOnBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond) // the behaviour under test: a body quiet past the header timeout
		io.WriteString(w, "late")
	})
	tr := newTransport(t)
	tr.Fallback.ResponseHeaderTimeout = 100 * time.Millisecond
	if code, got := roundTrip(t, tr, post(t.Context(), srv.URL, "x")); code != 200 || got != "late" {
		t.Fatalf("%d %q", code, got)
	}
}

// TestIdleBounds: no more connections are kept per host than
// MaxIdleConnsPerHost, and one idle past IdleConnTimeout is not reused.
func TestIdleBounds(t *testing.T) {
	var hold sync.WaitGroup
	hold.Add(1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Query().Has("hold") {
			hold.Wait()
		}
		io.WriteString(w, "ok")
	})
	tr := newTransport(t)
	tr.Fallback.MaxIdleConnsPerHost = 2
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			resp, err := tr.RoundTrip(post(t.Context(), srv.URL+"?hold", "x"))
			if err != nil {
				t.Error(err)
				return
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
		})
	}
	testwait.Until(t, "five connections", func() bool { return srv.conns.Load() >= 5 })
	hold.Done()
	wg.Wait()
	if tr.nidle != 2 || len(tr.idle[hostPort(strings.TrimPrefix(srv.URL, "http://"))]) != 2 {
		t.Fatalf("%d idle connections kept, want 2", tr.nidle)
	}

	now := time.Now()
	tr.now = func() time.Time { return now }
	tr.Fallback.IdleConnTimeout = time.Minute
	roundTrip(t, tr, post(t.Context(), srv.URL, "x"))
	opened := tr.Stats().Opened
	now = now.Add(2 * time.Minute)
	roundTrip(t, tr, post(t.Context(), srv.URL, "x"))
	if tr.Stats().Opened != opened+1 {
		t.Errorf("a connection idle past IdleConnTimeout was reused")
	}
	if tr.nidle != 1 {
		t.Errorf("%d idle connections, want the one just used (the expired ones dropped)", tr.nidle)
	}
}

// TestFallback: what this transport does not speak goes to net/http's.
func TestFallback(t *testing.T) {
	t.Run("https", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(echo))
		defer srv.Close()
		tr := New(srv.Client().Transport.(*http.Transport))
		defer tr.CloseIdleConnections()
		if code, got := roundTrip(t, tr, post(t.Context(), srv.URL, "tls")); code != 200 || got != "tls" {
			t.Fatalf("%d %q", code, got)
		}
		if st := tr.Stats(); st.Opened != 0 {
			t.Errorf("https went direct: %+v", st)
		}
	})
	srv := newServer(t, echo)
	t.Run("large body", func(t *testing.T) {
		tr := newTransport(t)
		big := strings.Repeat("b", MaxDirectBody+1)
		if code, got := roundTrip(t, tr, post(t.Context(), srv.URL, big)); code != 200 || len(got) != len(big) {
			t.Fatalf("%d %d bytes", code, len(got))
		}
		if st := tr.Stats(); st.Opened != 0 {
			t.Errorf("a body over MaxDirectBody went direct: %+v", st)
		}
	})
	t.Run("unknown length", func(t *testing.T) {
		tr := newTransport(t)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, io.MultiReader(strings.NewReader("u")))
		if code, got := roundTrip(t, tr, req); code != 200 || got != "u" {
			t.Fatalf("%d %q", code, got)
		}
		if st := tr.Stats(); st.Opened != 0 {
			t.Errorf("a body of unknown length went direct: %+v", st)
		}
	})
	t.Run("proxy", func(t *testing.T) {
		var proxied atomic.Int64
		proxy := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			proxied.Add(1)
			echo(w, r)
		})
		tr := newTransport(t)
		pu, _ := url.Parse(proxy.URL)
		tr.Fallback.Proxy = http.ProxyURL(pu)
		roundTrip(t, tr, post(t.Context(), srv.URL, "p"))
		if proxied.Load() != 1 || tr.Stats().Opened != 0 {
			t.Errorf("a proxied request went direct (proxy saw %d)", proxied.Load())
		}
	})
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"example.com":      "example.com:80",
		"example.com:8080": "example.com:8080",
		"127.0.0.1":        "127.0.0.1:80",
		"[::1]":            "[::1]:80",
		"[::1]:9":          "[::1]:9",
	} {
		if got := hostPort(in); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInvalidHeader: a header net/http would refuse is refused here too,
// before anything is sent.
func TestInvalidHeader(t *testing.T) {
	srv := newServer(t, echo)
	tr := newTransport(t)
	for _, h := range []http.Header{{"X-Bad": {"a\r\nInjected: 1"}}, {"Bad Name": {"v"}}} {
		req := post(t.Context(), srv.URL, "x")
		for k, v := range h {
			req.Header[k] = v
		}
		if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid header") {
			t.Errorf("header %q: err %v, want it refused", h, err)
		}
	}
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("server saw %d connections for refused requests", n)
	}
}

// TestSweep: connections kept for an address no request comes back for
// (an upstream a reload removed) are closed once idle past the timeout,
// and its entry goes with them.
func TestSweep(t *testing.T) {
	var closed atomic.Int64
	srv := newServer(t, echo, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				closed.Add(1)
			}
		}
	})
	tr := newTransport(t)
	tr.Fallback.IdleConnTimeout = 50 * time.Millisecond
	roundTrip(t, tr, post(t.Context(), srv.URL, "x"))
	if st := tr.Stats(); st.Idle != 1 {
		t.Fatalf("%+v, want one kept", st)
	}
	testwait.Until(t, "the sweep to close the idle connection", func() bool { return closed.Load() != 0 })
	if closed.Load() != 1 {
		t.Fatal("the idle connection was not closed by the sweep")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.nidle != 0 || len(tr.idle) != 0 || tr.sweep != nil {
		t.Errorf("after the sweep: %d idle, %d addresses, sweep armed %v", tr.nidle, len(tr.idle), tr.sweep != nil)
	}
}

// TestHeaderBounded: an upstream whose answer's header never ends fails
// its request once MaxResponseHeaderBytes are read, as net/http's
// Transport does, instead of growing the reader without bound.
func TestHeaderBounded(t *testing.T) {
	addr, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		for range 1000 { // 1 MB of header, and no blank line
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	tr := newTransport(t)
	tr.Fallback.MaxResponseHeaderBytes = 16 << 10
	_, err := tr.RoundTrip(post(t.Context(), "http://"+addr, "x"))
	if err == nil || !strings.Contains(err.Error(), "MaxResponseHeaderBytes") {
		t.Fatalf("err %v, want the header bound named", err)
	}
}

// TestBrokenAnswerNotResent: a kept connection that breaks after part of
// its answer is an answer that failed, not a stale connection: not even
// a GET goes again.
func TestBrokenAnswerNotResent(t *testing.T) {
	var gets atomic.Int64
	addr, _ := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		for n := 0; ; n++ {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			gets.Add(1)
			if n == 1 {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n") // and closes before the blank line
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := newTransport(t)
	get := func() *http.Request {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr, nil)
		return req
	}
	roundTrip(t, tr, get())
	if _, err := tr.RoundTrip(get()); err == nil || strings.Contains(err.Error(), "closed by the server") {
		t.Fatalf("err %v, want the broken answer's own error", err)
	}
	if n := gets.Load(); n != 2 {
		t.Errorf("server read %d GETs, want 2 (the broken one not sent again)", n)
	}
}
