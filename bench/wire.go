package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// wireConn is one load worker's keep-alive HTTP/1.1 connection to one
// endpoint, written and read on the worker's own goroutine, as wrk and
// h2load do. The load generator shares the two cores with the processes
// it measures, and net/http's client (its connection's reader and writer
// goroutines, the request and header copies) cost ~55 µs of them per
// call, more than half of what mcpgw itself spent on a stdio call: CPU
// taken from the process under test. This costs a write and a read.
//
// The request is written by hand (its head rebuilt in one buffer); the
// answer is read by net/http's own parser (http.ReadResponse). No
// internal/http1: its MSG_PEEK before each reuse, its cancellation and
// its request copies cost the generator 41–48 µs per call against 25 here
// (A/B, stdio-raw c=32), and it is the measured side's transport. A broken
// connection is dialled again by the next call.
type wireConn struct {
	url              string
	addr, host, path string
	timeout          time.Duration
	tls              *tls.Config // https: the handshake's; nil for http

	c    net.Conn
	br   *bufio.Reader
	req  []byte    // the request being written; its head is rebuilt per call
	used time.Time // when its last answer was read
}

// newWireConn is a connection to rawURL, not yet dialled. An https URL
// needs tlsConfig (its roots; a session cache resumes redials).
func newWireConn(rawURL string, timeout time.Duration, tlsConfig *tls.Config) (*wireConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	port := "80"
	switch {
	case u.Host == "":
		return nil, fmt.Errorf("load generator: %q has no host", rawURL)
	case u.Scheme == "https" && tlsConfig != nil:
		port = "443"
	case u.Scheme != "http":
		return nil, fmt.Errorf("load generator: %q is not an http:// URL (https only in the tls scenario)", rawURL)
	default:
		tlsConfig = nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	return &wireConn{url: rawURL, addr: addr, host: u.Host, path: u.RequestURI(), timeout: timeout, tls: tlsConfig}, nil
}

// close drops the connection; the next call dials a new one (and reads
// it through the same buffer, Reset).
func (w *wireConn) close() {
	if w.c != nil {
		_ = w.c.Close()
		w.c = nil
	}
}

// post sends body with headers h and reads the whole answer's body into
// buf. It returns the status code; any error leaves the connection closed.
func (w *wireConn) post(body []byte, h http.Header, buf *bytes.Buffer) (int, error) {
	if w.c == nil {
		var c net.Conn
		var err error
		if w.tls != nil {
			c, err = tls.DialWithDialer(&net.Dialer{Timeout: w.timeout}, "tcp", w.addr, w.tls)
		} else {
			c, err = net.DialTimeout("tcp", w.addr, w.timeout)
		}
		if err != nil {
			return 0, err
		}
		w.c = c
		if w.br == nil {
			w.br = bufio.NewReaderSize(c, 16<<10)
		} else {
			w.br.Reset(c)
		}
	}
	status, keep, err := w.exchange(body, h, buf)
	if err != nil || !keep {
		w.close()
	}
	w.used = time.Now()
	return status, err
}

func (w *wireConn) exchange(body []byte, h http.Header, buf *bytes.Buffer) (status int, keep bool, err error) {
	if err := w.c.SetDeadline(time.Now().Add(w.timeout)); err != nil {
		return 0, false, err
	}
	r := append(w.req[:0], "POST "...)
	r = append(r, w.path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, w.host...)
	r = append(r, "\r\n"...)
	for k, vs := range h {
		for _, v := range vs {
			r = append(r, k...)
			r = append(r, ": "...)
			r = append(r, v...)
			r = append(r, "\r\n"...)
		}
	}
	r = append(r, "Content-Length: "...)
	r = strconv.AppendInt(r, int64(len(body)), 10)
	r = append(r, "\r\n\r\n"...)
	r = append(r, body...)
	w.req = r
	if _, err := w.c.Write(r); err != nil {
		return 0, false, err
	}
	buf.Reset()
	return readAnswer(w.br, buf)
}

// readAnswer reads one answer from br with net/http's own parser (1xx
// interim answers skipped), its body into buf; keep is false when the
// server ends the connection after it.
func readAnswer(br *bufio.Reader, buf *bytes.Buffer) (status int, keep bool, err error) {
	resp, err := http.ReadResponse(br, nil)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(br, nil) // an interim answer has no body
	}
	if err != nil {
		return 0, false, err
	}
	_, err = io.Copy(buf, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, !resp.Close, err
}
