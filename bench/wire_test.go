package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadAnswer: what the generator makes of answers, good and
// malformed, as net/http reads them.
func TestReadAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, in   string
		status     int
		body       string
		keep, fail bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT", 200, "hello", true, false},
		{"chunked, extension and trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n3\r\n, w\r\n0\r\nX-T: 1\r\n\r\n", 200, "hello, w", true, false},
		{"header case", "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", 200, "ok", true, false},
		{"interim answer skipped", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", 202, "", true, false},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", 204, "", true, false},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 200, "ok", false, false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", false, false},
		{"to the end", "HTTP/1.1 200 OK\r\n\r\nall of it", 200, "all of it", false, false},
		{"LF only", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", 200, "ok", true, false},
		{"not HTTP", "SSH-2.0-x\r\n\r\n", 0, "", false, true},
		{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", 0, "", false, true},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, "", false, true},
		{"unknown coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, "", false, true},
		{"header without colon", "HTTP/1.1 200 OK\r\nnope\r\n\r\n", 0, "", false, true},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, "", false, true},
		{"chunk overrun", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", 0, "", false, true},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok", 0, "", false, true},
		{"cut in the head", "HTTP/1.1 200 OK\r\nContent-Le", 0, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			status, keep, err := readAnswer(bufio.NewReader(strings.NewReader(tc.in)), &buf)
			if tc.fail {
				if err == nil {
					t.Fatalf("readAnswer = %d, %q; want an error", status, buf.String())
				}
				return
			}
			if err != nil || status != tc.status || buf.String() != tc.body || keep != tc.keep {
				t.Fatalf("readAnswer = %d, %q, keep %v, %v; want %d, %q, keep %v", status, buf.String(), keep, err, tc.status, tc.body, tc.keep)
			}
		})
	}
}

// TestWireConn runs calls over loopback against net/http's server: JSON
// and flushed SSE (chunked) answers, the request as net/http reads it,
// one connection for many calls, and a new one after the server closes.
func TestWireConn(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/mcp" || r.URL.RawQuery != "q=1" || r.Header.Get("Mcp-Session-Id") != "s1" || r.ContentLength != int64(len(body)) {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		switch string(body) {
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				_, _ = io.WriteString(w, "data: "+strings.Repeat("x", i)+"\n\n")
				w.(http.Flusher).Flush()
			}
		case "close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		default:
			_, _ = w.Write(body)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	wc, err := newWireConn(srv.URL+"/mcp?q=1", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.close()
	h := http.Header{"Mcp-Session-Id": {"s1"}, "Content-Type": {"application/json"}}
	var buf bytes.Buffer
	call := func(body, want string) {
		t.Helper()
		status, err := wc.post([]byte(body), h, &buf)
		if err != nil || status != http.StatusOK || buf.String() != want {
			t.Fatalf("post %q = %d, %q, %v; want 200, %q", body, status, buf.String(), err, want)
		}
	}
	for range 20 {
		call(`{"id":1}`, `{"id":1}`)
		call("sse", "data: \n\ndata: x\n\ndata: xx\n\n")
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("40 calls took %d connections, want 1", n)
	}
	call("close", "bye")
	call(`{"id":2}`, `{"id":2}`)
	if n := conns.Load(); n != 2 {
		t.Fatalf("after the server closed one: %d connections, want 2", n)
	}

	if _, err := newWireConn("https://127.0.0.1/mcp", time.Second, nil); err == nil {
		t.Fatal("an https URL was taken without a TLS config")
	}
}

// TestWireConnTLS: with a TLS config, an https endpoint is dialled with a
// handshake verified by its roots, and kept alive like a plain one.
func TestWireConnTLS(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.URL.Path))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	wc, err := newWireConn(srv.URL+"/mcp", 5*time.Second, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.close()
	var buf bytes.Buffer
	for range 5 {
		status, err := wc.post([]byte("{}"), http.Header{}, &buf)
		if err != nil || status != 200 || buf.String() != "/mcp" {
			t.Fatalf("post over TLS: %d %q %v", status, buf.String(), err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 calls took %d connections, want 1", n)
	}
	untrusted, _ := newWireConn(srv.URL+"/mcp", 5*time.Second, &tls.Config{RootCAs: x509.NewCertPool()})
	if _, err := untrusted.post([]byte("{}"), http.Header{}, &buf); err == nil {
		t.Fatal("a server whose certificate the roots do not vouch for was taken")
	}
}

// TestCallerKeepsConnections: a run's connections serve the next run at
// the same URL (the direct row's upstream then counts no new ones), a
// broken one is not kept, and closeIdle ends them.
func TestCallerKeepsConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newCaller()
	l := load{conc: 4, tool: "echo", args: `{}`, want: []byte("hello"), calls: 40}
	for run := range 3 {
		if r := c.run(t.Context(), srv.URL, l); r.errs != 0 || len(r.lat) != 40 {
			t.Fatalf("run %d: %d calls, %d errors (%s)", run, len(r.lat), r.errs, r.errMsg)
		}
	}
	if n := conns.Load(); n != 4 {
		t.Fatalf("3 runs of 4 workers opened %d connections, want 4", n)
	}
	wc, err := c.conn(srv.URL)
	if err != nil || wc.c == nil {
		t.Fatalf("conn = %v, %v; want a kept connection", wc, err)
	}
	wc.close()
	c.release(wc)
	c.closeIdle()
	if len(c.idle) != 0 {
		t.Fatalf("closeIdle left %d URLs", len(c.idle))
	}
}

// TestCallerDropsStaleConnections: a connection unused for longer than
// keepIdle is closed rather than handed to a run (its server may have
// closed it, and the run would count that as a failed call).
func TestCallerDropsStaleConnections(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c := newCaller()
	defer c.closeIdle()
	wc, err := c.conn(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := wc.post([]byte("{}"), http.Header{}, &buf); err != nil {
		t.Fatal(err)
	}
	old := wc.c
	wc.used = time.Now().Add(-keepIdle - time.Second)
	c.release(wc)
	got, err := c.conn(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got.c != nil || old.SetDeadline(time.Now()) == nil {
		t.Fatalf("a connection idle past keepIdle was handed out (%v) or left open", got.c)
	}
	if _, err := got.post([]byte("{}"), http.Header{}, &buf); err != nil || buf.String() != "ok" {
		t.Fatalf("the new connection's call: %q, %v", buf.String(), err)
	}
}

// TestCallerSpreads: a load with spread sends worker w's calls to
// spread[w%len] over one connection each, as a balancer in the kernel
// spreads connections over the fleet's replicas; the run's url is unused.
func TestCallerSpreads(t *testing.T) {
	var calls [3]atomic.Int32
	var urls []string
	for i := range calls {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls[i].Add(1)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`)
		}))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	c := newCaller()
	defer c.closeIdle()
	l := load{conc: 6, tool: "echo", args: `{}`, want: []byte("hello"), calls: 60, spread: urls}
	if r := c.run(t.Context(), "http://127.0.0.1:1/unused", l); r.errs != 0 || len(r.lat) != 60 {
		t.Fatalf("%d calls, %d errors (%s)", len(r.lat), r.errs, r.errMsg)
	}
	for i := range calls {
		if calls[i].Load() == 0 {
			t.Errorf("server %d got no call; want every spread URL used", i)
		}
	}
}
