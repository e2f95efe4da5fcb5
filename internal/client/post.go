package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Building and sending a Streamable HTTP POST, the one request every call
// makes. http.NewRequestWithContext parses the URL per call,
// http.Header.Set makes a slice per header, and http.Client.Do clones the
// request and its headers for the redirects it may follow: about a dozen
// allocations per call that the forwarder mcpgw is measured against never
// makes (issue 18). So the URL is parsed once, the header values that
// never change are made once, and the POST goes to the client's Transport
// directly, with a redirect policy of its own.
//
// The redirect policy (what http.Client would do is wrong for MCP both
// ways): a 307 or 308 to the same origin is followed, with the same method,
// body and headers, as the status asks (the message was not processed);
// a redirect to another origin is refused, since the body and the
// upstream's configured headers (credentials, often not Authorization,
// which is all net/http strips) would go where the upstream says; and a
// 301, 302 or 303 is refused, because following it turns the POST into a
// GET without the message.

// maxRedirects bounds the redirects one POST follows.
const maxRedirects = 5

// Header values shared by every request (never written: a capacity equal
// to their length makes an append copy them).
var (
	valueJSON   = []string{"application/json"}[:1:1]
	valueAccept = []string{"application/json, text/event-stream"}[:1:1]
)

// headerValue is v as a header's value slice, made once.
func headerValue(v string) []string { return []string{v}[:1:1] }

// newPost is a POST of msg to the upstream with ctx, its headers still to
// be set (the header map has room for n).
func (s *Streamable) newPost(ctx context.Context, msg []byte, n int) (*http.Request, error) {
	if s.url == nil { // a URL that does not parse: NewRequest says why
		return http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(msg))
	}
	// A NopCloser over a bytes.Reader, as NewRequest makes it: net/http
	// writes the headers and such a body in one write (anything else
	// gets its headers flushed first, a second write and packet per
	// call). GetBody remakes it: http.Transport sends a POST again on a
	// fresh connection only when the stale one took nothing and the body
	// can be remade.
	body := io.NopCloser(bytes.NewReader(msg))
	again := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(msg)), nil }
	r := http.Request{
		Method:     http.MethodPost,
		URL:        s.url, // shared, read only: a transport must not modify the request
		Proto:      "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1,
		Header:        make(http.Header, n),
		Body:          body,
		GetBody:       again,
		ContentLength: int64(len(msg)),
		Host:          s.url.Host,
	}
	return r.WithContext(ctx), nil
}

// post sends req. A client with its own timeout, cookie jar or redirect
// policy keeps them (http.Client.Do); the default one's Transport gets the
// request directly, with the redirect policy above.
func (s *Streamable) post(req *http.Request) (*http.Response, error) { return send(s.cfg.Client, req) }

// send is post for any request to an upstream (the POSTs, the GET
// streams and their resumptions, the DELETE, the legacy SSE transport's
// requests): one redirect policy for all, so that no request follows a
// redirect to another origin with the upstream's configured headers.
func send(c *http.Client, req *http.Request) (*http.Response, error) {
	if c.Timeout != 0 || c.Jar != nil || c.CheckRedirect != nil {
		return c.Do(req)
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	for hops := 0; ; hops++ {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" {
			return resp, nil // a 3xx without a Location is the answer, as http.Client has it
		}
		discard(resp.Body)
		next, err := redirect(req, resp.StatusCode, loc, hops)
		if err != nil {
			return nil, err
		}
		req = next
	}
}

// redirect is the request that follows a redirect to loc, or why it is
// not followed.
func redirect(req *http.Request, status int, loc string, hops int) (*http.Request, error) {
	to, err := req.URL.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("upstream answered HTTP %d with a Location that is not a URL (%q)", status, loc)
	}
	shown := redactURL(to.String())
	switch {
	case status != http.StatusTemporaryRedirect && status != http.StatusPermanentRedirect && req.Method != http.MethodGet:
		return nil, fmt.Errorf("upstream answered HTTP %d, redirecting the %s to %s: following it would turn it into a GET without the message; set the upstream's url to the MCP endpoint itself", status, req.Method, shown)
	case to.Scheme != req.URL.Scheme || to.Host != req.URL.Host:
		return nil, fmt.Errorf("upstream answered HTTP %d, redirecting the message to another origin (%s): refused, so that the message and the upstream's headers do not go there; set the upstream's url to that endpoint if it is the one meant", status, shown)
	case hops >= maxRedirects:
		return nil, fmt.Errorf("upstream redirected the message %d times (last to %s); set the upstream's url to the MCP endpoint itself", hops+1, shown)
	}
	next := req.Clone(req.Context())
	next.URL, next.Host = to, to.Host
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		next.Body = body
	}
	return next, nil
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// discard reads a little of a body being dropped, so that its connection
// can be reused, and closes it.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// parseURL is the upstream URL as a request takes it (nil when it does
// not parse: the first request then says why).
func parseURL(raw string) *url.URL {
	req, err := http.NewRequest(http.MethodPost, raw, nil)
	if err != nil {
		return nil
	}
	return req.URL
}
