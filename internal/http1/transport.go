// Package http1 owns the transport of mcpgw's requests to plain-HTTP
// upstreams: HTTP/1.1 on pooled keep-alive connections, each request
// written and its answer read on the goroutine that sends it.
//
// net/http's Transport gives every connection a reader and a writer
// goroutine and hands each request to the writer, the answer from the
// reader and the end of its body back to the reader, over channels: four
// goroutine handoffs and ~25 allocations per call that a gateway's
// one-message calls never need (issue 18: on top of the syscalls any
// transport makes, they cost 11 % of mcpgw's CPU per call). The request
// and answer themselves are written and parsed by net/http
// (Request.Write, ReadResponse), so the wire format is net/http's.
//
// What this transport does not do goes to Fallback, a net/http Transport:
// https (TLS and HTTP/2), proxies, requests whose body has no known length
// or is larger than MaxDirectBody (a server may answer those before
// reading them whole, which only a concurrent reader sees), upgrades.
package http1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// MaxDirectBody is the largest request body sent on the caller's
// goroutine; larger ones go to the fallback. A server may answer a body
// it refuses (413) and close before reading it: with the whole body in the
// socket's buffers the answer is still read; past them, only net/http's
// concurrent reader would see it.
const MaxDirectBody = 64 << 10

// Transport is an http.RoundTripper for http:// URLs without a proxy; any
// other request goes to Fallback.
type Transport struct {
	// Fallback serves what this transport does not, and lends it its
	// DialContext, Proxy, MaxIdleConnsPerHost, MaxIdleConns,
	// IdleConnTimeout, ResponseHeaderTimeout and MaxResponseHeaderBytes.
	Fallback *http.Transport

	// now is the clock of idle timeouts (tests move it).
	now func() time.Time

	mu    sync.Mutex
	idle  map[string][]*conn // by host:port, most recently used last
	nidle int
	// sweep closes connections idle past IdleConnTimeout that no request
	// came back for (an upstream removed by a reload): armed while any
	// connection is kept, stopped by CloseIdleConnections.
	sweep *time.Timer

	opened, reused atomic.Int64
}

// New returns a Transport over fallback.
func New(fallback *http.Transport) *Transport {
	return &Transport{Fallback: fallback, now: time.Now, idle: map[string][]*conn{}}
}

// Stats counts the connections this transport opened, the requests that
// reused one, and the connections kept idle now.
type Stats struct{ Opened, Reused, Idle int64 }

// Stats reports the transport's connection counts.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	idle := t.nidle
	t.mu.Unlock()
	return Stats{Opened: t.opened.Load(), Reused: t.reused.Load(), Idle: int64(idle)}
}

// direct reports whether req is one this transport sends itself.
func (t *Transport) direct(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.User != nil {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && (req.ContentLength <= 0 || req.ContentLength > MaxDirectBody) {
		return false
	}
	if req.Header.Get("Upgrade") != "" || req.Header.Get("Expect") != "" {
		return false
	}
	if t.Fallback.Proxy != nil {
		if u, err := t.Fallback.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// RoundTrip sends req and reads the answer's header; the body is read by
// the caller, on whose goroutine it is read from the connection.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.direct(req) {
		return t.Fallback.RoundTrip(req)
	}
	if err := validHeader(req.Header); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	addr := hostPort(req.URL.Host)
	for attempt := 0; ; attempt++ {
		c, err := t.get(ctx, addr)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := c.roundTrip(ctx, req, t, addr)
		if err == nil {
			return resp, nil
		}
		var stale *staleError
		if errors.As(err, &stale) && attempt < 2 && ctx.Err() == nil && replayable(req) {
			// A kept connection that ended before any of its answer: the
			// server closed it as it was handed out. A request that may
			// be sent twice goes again on another connection (at most
			// twice); a POST does not, as net/http has it, since the
			// server may have read and acted on it before it closed.
			if req.Body != nil && req.Body != http.NoBody {
				body, berr := req.GetBody()
				if berr != nil {
					return nil, err
				}
				r2 := *req
				r2.Body = body
				req = &r2
			}
			continue
		}
		closeBody(req)
		return nil, err
	}
}

// validHeader refuses what net/http's Transport refuses: a header name or
// value that would not be one header on the wire (Request.Write would
// turn a newline in a value into a space, and send a bad name as it is).
func validHeader(h http.Header) error {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// replayable reports whether req may be sent again after a failure that
// may have reached the server: net/http's rule (an idempotent method, or
// an idempotency key, with a body that can be remade).
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// hostPort is host with its port (80 when it has none).
func hostPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return net.JoinHostPort(host, "80")
}

// get is a kept connection to addr that its server has not closed, or a
// new one.
func (t *Transport) get(ctx context.Context, addr string) (*conn, error) {
	now := t.now()
	t.mu.Lock()
	for list := t.idle[addr]; len(list) > 0; list = t.idle[addr] {
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[addr] = list[:len(list)-1]
		t.nidle--
		t.mu.Unlock()
		if t.expired(c, now) || !c.alive() {
			c.nc.Close()
			t.mu.Lock()
			continue
		}
		c.reused = true
		t.reused.Add(1)
		return c, nil
	}
	t.mu.Unlock()
	return t.dial(ctx, addr)
}

func (t *Transport) expired(c *conn, now time.Time) bool {
	d := t.Fallback.IdleConnTimeout
	return d > 0 && now.Sub(c.idleSince) > d
}

func (t *Transport) dial(ctx context.Context, addr string) (*conn, error) {
	dial := t.Fallback.DialContext
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	t.opened.Add(1)
	return newConn(nc), nil
}

// put keeps c for the next request to addr, within the idle bounds.
func (t *Transport) put(addr string, c *conn) {
	c.idleSince = t.now()
	perHost := t.Fallback.MaxIdleConnsPerHost
	if perHost == 0 {
		perHost = http.DefaultMaxIdleConnsPerHost
	}
	t.mu.Lock()
	list := t.idle[addr]
	if len(list) >= perHost || (t.Fallback.MaxIdleConns > 0 && t.nidle >= t.Fallback.MaxIdleConns) || t.Fallback.DisableKeepAlives {
		t.mu.Unlock()
		c.nc.Close() // over the bound: closed, as net/http closes it
		return
	}
	t.idle[addr] = append(list, c)
	t.nidle++
	if d := t.Fallback.IdleConnTimeout; d > 0 && t.sweep == nil {
		t.sweep = time.AfterFunc(d, t.expire)
	}
	t.mu.Unlock()
}

// expire closes the connections idle past IdleConnTimeout, and is armed
// again while any stays kept.
func (t *Transport) expire() {
	now := t.now()
	var old []*conn
	t.mu.Lock()
	for addr, list := range t.idle {
		// A list is in the order its connections were kept: the
		// expired ones are at its front.
		n := 0
		for n < len(list) && t.expired(list[n], now) {
			old = append(old, list[n])
			n++
		}
		if n == len(list) {
			delete(t.idle, addr)
			continue
		}
		clear(list[:n])
		t.idle[addr] = list[n:]
	}
	t.nidle -= len(old)
	t.sweep = nil
	if d := t.Fallback.IdleConnTimeout; d > 0 && t.nidle > 0 {
		t.sweep = time.AfterFunc(d/2, t.expire) // a connection lives at most 1.5 × the timeout
	}
	t.mu.Unlock()
	for _, c := range old {
		c.nc.Close()
	}
}

// CloseIdleConnections closes the kept connections, the fallback's too.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*conn{}
	t.nidle = 0
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.nc.Close()
		}
	}
	t.Fallback.CloseIdleConnections()
}

// conn is one connection: its buffered reader and writer, and whether it
// was kept from an earlier request.
type conn struct {
	nc        net.Conn
	lr        limitedReader // between nc and br: bounds a response's header
	br        *bufio.Reader
	bw        *bufio.Writer
	peek      *peeker
	reused    bool
	idleSince time.Time
}

func newConn(nc net.Conn) *conn {
	c := &conn{nc: nc, bw: bufio.NewWriterSize(nc, 4<<10), peek: newPeeker(nc)}
	c.lr.r = nc
	c.br = bufio.NewReaderSize(&c.lr, 4<<10)
	return c
}

// limitedReader refuses to read past n bytes while on: a response's
// header is bounded as net/http bounds it (MaxResponseHeaderBytes, 10 MB
// by default), so an upstream that sends a header without end fails its
// request instead of growing the gateway's memory.
type limitedReader struct {
	r  io.Reader
	n  int64
	on bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if !l.on {
		return l.r.Read(p)
	}
	if l.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

var errHeaderTooLarge = errors.New("upstream's response header is larger than the transport's MaxResponseHeaderBytes")

// maxHeaderBytes is net/http's bound on a response header.
func (t *Transport) maxHeaderBytes() int64 {
	if n := t.Fallback.MaxResponseHeaderBytes; n > 0 {
		return n
	}
	return 10 << 20
}

// alive reports whether a kept connection can take a request: its server
// has not closed it and sent nothing unasked.
func (c *conn) alive() bool { return c.br.Buffered() == 0 && c.peek.idle() }

// staleError is a kept connection that ended before any byte of its
// answer arrived: the server closed it while it was idle.
type staleError struct{ err error }

func (e *staleError) Error() string { return "kept connection closed by the server: " + e.err.Error() }
func (e *staleError) Unwrap() error { return e.err }

// aLongTimeAgo is a deadline that has passed: setting it ends a blocked
// read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip writes req on c and reads the answer's header. The body, when
// there is one, keeps c until it is read to its end (c then goes back to
// t's pool) or closed (c is closed).
func (c *conn) roundTrip(ctx context.Context, req *http.Request, t *Transport, addr string) (*http.Response, error) {
	var cancelled atomic.Bool
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() {
			cancelled.Store(true)
			c.nc.SetDeadline(aLongTimeAgo)
		})
	}
	fail := func(err error) (*http.Response, error) {
		stop()
		c.nc.Close()
		if cancelled.Load() || ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := req.Write(c.bw); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		if c.reused && isClosed(err) && !cancelled.Load() {
			err = &staleError{err: err}
		}
		return fail(err)
	}
	if d := t.Fallback.ResponseHeaderTimeout; d > 0 {
		c.nc.SetReadDeadline(time.Now().Add(d))
		if cancelled.Load() {
			// Cancelled since the request was written: that past deadline
			// was just replaced by the timeout's, and the header read would
			// wait for the timeout instead of ending now.
			c.nc.SetDeadline(aLongTimeAgo)
		}
	}
	c.lr.n, c.lr.on = t.maxHeaderBytes(), true
	// Nothing at all of an answer on a kept connection: its server closed
	// it as it was handed out (stale). Once a byte came, it is an answer
	// that broke, not a connection to try again.
	if _, err := c.br.Peek(1); err != nil && c.reused && isClosed(err) && !cancelled.Load() {
		return fail(&staleError{err: err})
	}
	var resp *http.Response
	for {
		r, err := http.ReadResponse(c.br, req)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() && !cancelled.Load() {
				err = fmt.Errorf("upstream sent no response header within %s", t.Fallback.ResponseHeaderTimeout)
			}
			return fail(err)
		}
		if r.StatusCode >= 100 && r.StatusCode < 200 && r.StatusCode != http.StatusSwitchingProtocols {
			continue // informational (103 Early Hints): the answer follows
		}
		resp = r
		break
	}
	c.lr.on = false // the body is bounded by its reader (an SSE event, a JSON answer)
	if t.Fallback.ResponseHeaderTimeout > 0 {
		c.nc.SetReadDeadline(time.Time{})
		if cancelled.Load() {
			// Cancelled while the header was read: that deadline was
			// just cleared with the timeout's.
			c.nc.SetDeadline(aLongTimeAgo)
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return fail(errors.New("upstream switched protocols, which no MCP request asks"))
	}
	keep := !resp.Close && !req.Close
	b := &body{rc: resp.Body, c: c, t: t, addr: addr, keep: keep, stop: stop, cancelled: &cancelled, ctx: ctx}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// isClosed reports whether err is the connection ending (EOF, reset).
func isClosed(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// body is an answer's body: read from its connection on the reader's
// goroutine; its end hands the connection back.
type body struct {
	rc        io.ReadCloser
	c         *conn
	t         *Transport
	addr      string
	keep      bool
	stop      func() bool
	cancelled *atomic.Bool
	ctx       context.Context
	done      atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		b.finish(false)
		if b.cancelled.Load() {
			err = b.ctx.Err()
		}
	}
	return n, err
}

// Close ends the body; one not read to its end closes its connection
// first, so that a Read blocked on it returns.
func (b *body) Close() error {
	b.finish(false)
	return b.rc.Close()
}

// finish hands the connection back when the body was read whole (atEnd)
// and nothing cancelled it, and closes it otherwise. Only its first call
// acts.
func (b *body) finish(atEnd bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if atEnd && b.stop() && b.keep {
		b.t.put(b.addr, b.c)
		return
	}
	b.stop()
	b.c.nc.Close()
}
