package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
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
// It speaks just what the bench's answers need: a status line, headers,
// and a body sized by Content-Length or chunked (mcpgw's SSE answers);
// anything else is an error naming what came. A broken connection is
// dialled again by the next call.
type wireConn struct {
	url              string
	addr, host, path string
	timeout          time.Duration

	c    net.Conn
	br   *bufio.Reader
	req  []byte    // the request being written; its head is rebuilt per call
	used time.Time // when its last answer was read
}

// newWireConn is a connection to rawURL (http only), not yet dialled.
func newWireConn(rawURL string, timeout time.Duration) (*wireConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("load generator: %q is not an http:// URL", rawURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &wireConn{url: rawURL, addr: addr, host: u.Host, path: u.RequestURI(), timeout: timeout}, nil
}

// close drops the connection; the next call dials a new one.
func (w *wireConn) close() {
	if w.c != nil {
		_ = w.c.Close()
		w.c, w.br = nil, nil
	}
}

// post sends body with headers h and reads the whole answer's body into
// buf. It returns the status code; any error leaves the connection closed.
func (w *wireConn) post(body []byte, h http.Header, buf *bytes.Buffer) (int, error) {
	if w.c == nil {
		c, err := net.DialTimeout("tcp", w.addr, w.timeout)
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

var errWire = errors.New("load generator: malformed HTTP answer")

// readAnswer reads one HTTP/1.1 response from br, its body into buf
// (1xx interim answers skipped); keep is false when the server ends the
// connection after it.
func readAnswer(br *bufio.Reader, buf *bytes.Buffer) (status int, keep bool, err error) {
	for {
		var (
			length           int64
			chunked, closing bool
		)
		status, length, chunked, closing, err = readHead(br)
		if err != nil {
			return 0, false, err
		}
		if status >= 100 && status < 200 {
			continue
		}
		switch {
		case status == http.StatusNoContent || status == http.StatusNotModified:
		case chunked:
			err = readChunked(br, buf)
		case length >= 0:
			_, err = io.CopyN(buf, br, length)
		default:
			_, err = io.Copy(buf, br) // to the connection's end
			closing = true
		}
		return status, !closing, err
	}
}

// readHead reads a status line and headers: the status code, the body's
// Content-Length (-1: none), whether it is chunked and whether the server
// closes the connection after it.
func readHead(br *bufio.Reader) (status int, length int64, chunked, closing bool, err error) {
	line, err := readLine(br)
	if err != nil {
		return 0, 0, false, false, err
	}
	// "HTTP/1.1 200 OK"
	proto, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || !bytes.HasPrefix(proto, []byte("HTTP/1.")) || len(rest) < 3 {
		return 0, 0, false, false, fmt.Errorf("%w: status line %q", errWire, line)
	}
	status, err = strconv.Atoi(string(rest[:3]))
	if err != nil {
		return 0, 0, false, false, fmt.Errorf("%w: status line %q", errWire, line)
	}
	closing = bytes.Equal(proto, []byte("HTTP/1.0"))
	length = -1
	for {
		line, err = readLine(br)
		if err != nil {
			return 0, 0, false, false, err
		}
		if len(line) == 0 {
			return status, length, chunked, closing, nil
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, 0, false, false, fmt.Errorf("%w: header line %q", errWire, line)
		}
		v = bytes.TrimSpace(v)
		switch {
		case asciiEqualFold(k, "Content-Length"):
			if length, err = strconv.ParseInt(string(v), 10, 64); err != nil || length < 0 {
				return 0, 0, false, false, fmt.Errorf("%w: Content-Length %q", errWire, v)
			}
		case asciiEqualFold(k, "Transfer-Encoding"):
			chunked = asciiEqualFold(v, "chunked")
			if !chunked {
				return 0, 0, false, false, fmt.Errorf("%w: Transfer-Encoding %q", errWire, v)
			}
		case asciiEqualFold(k, "Connection"):
			closing = closing || asciiEqualFold(v, "close")
		}
	}
}

// readChunked reads a chunked body into buf, and its trailer.
func readChunked(br *bufio.Reader, buf *bytes.Buffer) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // a chunk extension
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: chunk size %q", errWire, line)
		}
		if n == 0 {
			for { // the trailer, to its empty line
				if line, err = readLine(br); err != nil || len(line) == 0 {
					return err
				}
			}
		}
		if _, err := io.CopyN(buf, br, n); err != nil {
			return err
		}
		if line, err = readLine(br); err != nil {
			return err
		}
		if len(line) != 0 {
			return fmt.Errorf("%w: %d bytes after a chunk", errWire, len(line))
		}
	}
}

// readLine returns a line without its CRLF (or LF); the slice is valid
// until the next read. Lines longer than the reader's buffer are errors:
// no status or header line of the bench's answers comes near 16 KiB.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", errWire, br.Size())
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return slices.Clip(line), nil
}

// asciiEqualFold reports whether b equals s, ignoring ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
