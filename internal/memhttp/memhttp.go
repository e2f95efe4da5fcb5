// Package memhttp is HTTP without sockets, for tests: Transport is an
// http.RoundTripper that serves each request with an http.Handler in the
// same process. The response streams as the handler writes it (event
// streams included), and closing the response body or ending the
// request's context ends the handler's request context, as a client going
// away would. An MCP client (the gateway's own, or the official SDK's)
// given an http.Client with it talks to an MCP server handler (the
// gateway's router, or an SDK server) with no network and no child
// process.
package memhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// Transport serves requests with Handler.
type Transport struct {
	Handler http.Handler
}

// Client is an http.Client over a Transport serving h.
func Client(h http.Handler) *http.Client { return &http.Client{Transport: Transport{Handler: h}} }

// errClientGone ends a handler's writes once the client closed the body.
var errClientGone = errors.New("memhttp: the client closed the response body")

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		// Not sent, as over a socket: a handler that answers at once
		// could otherwise race the cancellation and win.
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	in := req.Clone(ctx)
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "127.0.0.1:1" // what a handler logs as the peer
	in.Host = req.URL.Host
	if req.Host != "" {
		in.Host = req.Host
	}
	if in.Body == nil {
		in.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &responseWriter{header: http.Header{}, pipe: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			if ctx.Err() != nil && !w.wasStarted() {
				// The handler ended because the client went away before any
				// answer: the client sees its context's error, as it would
				// over a socket, not an answer nobody wrote.
				_ = pw.CloseWithError(ctx.Err())
				return
			}
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing answered 200
			_ = pw.Close()
		}()
		t.Handler.ServeHTTP(w, in)
	}()
	select {
	case <-w.started:
	case <-ctx.Done():
		cancel()
		_ = pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &body{PipeReader: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// body is the client's end of the response; closing it ends the handler's
// request context.
type body struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *body) Close() error {
	b.cancel()
	return b.CloseWithError(errClientGone)
}

// responseWriter is the handler's end.
type responseWriter struct {
	header  http.Header
	pipe    *io.PipeWriter
	once    sync.Once
	status  int
	sent    http.Header // the header as it was at WriteHeader
	started chan struct{}
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) wasStarted() bool {
	select {
	case <-w.started:
		return true
	default:
		return false
	}
}

func (w *responseWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pipe.Write(b) // returns once the client read it: nothing is buffered
}

// Flush implements http.Flusher: every write already reached the client.
func (w *responseWriter) Flush() { w.WriteHeader(http.StatusOK) }
