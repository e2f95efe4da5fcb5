package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/http1"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/internal/upcall"
	"github.com/mcpgw/mcpgw/internal/workers"
)

// HTTPConfig describes an HTTP upstream.
type HTTPConfig struct {
	URL string
	// Headers are added to every request (upstream credentials from config;
	// never anything from the downstream request).
	Headers map[string]string
	// Client is the HTTP client to use (its Transport carries connect and
	// header timeouts). Nil means a default client.
	Client *http.Client
	// MaxMessageBytes caps one JSON body or SSE event.
	MaxMessageBytes int
	Logger          *zap.Logger
}

func (c *HTTPConfig) defaults() {
	if c.Client == nil {
		c.Client = &http.Client{Transport: DefaultHTTPTransport()}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 8 << 20
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// DefaultHTTPTransport returns a transport with bounded connect and
// response-header waits, so a dead upstream fails fast instead of hanging.
// It keeps enough idle connections for hundreds of concurrent calls to one
// upstream (and a thousand over all of them): with fewer, every burst
// above the bound closes connections it then reopens (at c=256, 64 per
// host and 100 in all made ~200 new upstream connections a second).
// Plain-http requests are sent by internal/http1 on the caller's
// goroutine; the net/http Transport underneath serves the rest.
func DefaultHTTPTransport() *http1.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 60 * time.Second
	t.MaxIdleConnsPerHost = MaxIdleConnsPerUpstream
	t.MaxIdleConns = MaxIdleConns
	return http1.New(t)
}

// drainAfterAnswer bounds how long a 2026-07-28 answer stream is read
// after its answer, for the connection's reuse.
const drainAfterAnswer = 5 * time.Second

// The idle-connection bounds of DefaultHTTPTransport.
const (
	MaxIdleConnsPerUpstream = 512
	MaxIdleConns            = 1024
)

// StatusError is an HTTP answer the transport could not use.
type StatusError struct {
	Status int
	Body   string
	// Hint names a likely fix (the other transport), or is empty.
	Hint string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("upstream answered HTTP %d", e.Status)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// opening reports whether msg is a client's first request (initialize, or
// a 2026-07-28 client's server/discover): a refusal of anything later is
// not about the transport.
func opening(msg []byte) bool {
	m, _ := rawjson.GetString(msg, "method")
	return m == mcp.MethodInitialize || m == mcp.MethodServerDiscover
}

// The hints for a url upstream configured with the other transport: a
// legacy HTTP+SSE endpoint refuses the POST a Streamable HTTP client
// opens with (404, 405), and a Streamable HTTP endpoint refuses the GET a
// legacy client opens with, or never sends its endpoint event.
const (
	hintLegacySSE  = "if this is a legacy HTTP+SSE (2024-11-05) endpoint, set transport: sse for this upstream"
	hintStreamable = "if this is a Streamable HTTP endpoint, remove transport: sse from this upstream (or set transport: streamable)"
)

// lifecycle is the done/err/goroutine bookkeeping both HTTP transports share.
type lifecycle struct {
	ctx    context.Context // cancelled by Close: ends every stream
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pool   *workers.Pool // runs goTracked's goroutines

	mu      sync.Mutex
	stopped bool // no goroutine may start once stop began waiting

	done     chan struct{}
	doneOnce sync.Once
	err      error
}

// The streams' goroutines kept between requests (internal/workers): an
// answer stream is read on one per request.
const (
	maxIdleReaders = 256
	idleReaderTime = 2 * time.Second
)

func newLifecycle() lifecycle {
	ctx, cancel := context.WithCancel(context.Background())
	return lifecycle{ctx: ctx, cancel: cancel, done: make(chan struct{}), pool: workers.New(maxIdleReaders, idleReaderTime)}
}

func (l *lifecycle) fail(err error) {
	l.doneOnce.Do(func() {
		l.err = err
		close(l.done)
	})
}

func (l *lifecycle) Done() <-chan struct{} { return l.done }

func (l *lifecycle) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// goTracked runs fn on a goroutine that stop waits for. It reports false,
// without running fn, once stop has begun.
func (l *lifecycle) goTracked(fn func()) bool {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return false
	}
	l.wg.Add(1)
	l.mu.Unlock()
	l.pool.Go(func() { // cannot be refused: the pool closes after stopped is set
		defer l.wg.Done()
		fn()
	})
	return true
}

// stop cancels every stream and waits for their goroutines.
func (l *lifecycle) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	l.pool.Close()
}

// requestContext derives a request context from the transport's lifetime
// that is also cancelled if ctx ends before the response headers arrive;
// the returned stop detaches ctx once the headers are in, so a streamed
// answer outlives the caller's Send.
func (l *lifecycle) requestContext(ctx context.Context) (context.Context, context.CancelFunc, func() bool) {
	rctx, cancel := context.WithCancel(l.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return rctx, cancel, stop
}

func readSnippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return string(bytes.TrimSpace(b))
}

func mediaType(h http.Header) string {
	ct := h.Get("Content-Type")
	switch ct {
	case mcp.ContentTypeJSON, mcp.ContentTypeEventStream:
		return ct // the usual answers, without ParseMediaType's map
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt
}

// readEvents delivers every SSE "message" event's data until the stream
// ends. It returns the last event id and the last reconnection time the
// server asked for ("retry:", 0 when none).
func readEvents(body io.Reader, max int, chunks *sse.Chunks, deliver func([]byte), log *zap.Logger) (lastID string, retry time.Duration, err error) {
	rd := sse.NewReaderChunks(body, max, chunks)
	for {
		ev, err := rd.Next()
		if err != nil {
			return rd.LastEventID(), retry, err
		}
		if data, ok := message(ev, &retry, log); ok {
			deliver(data)
		}
	}
}

// message is the JSON-RPC message an SSE event carries, if any; it notes
// the reconnection time the event asks for in retry.
func message(ev sse.Event, retry *time.Duration, log *zap.Logger) ([]byte, bool) {
	if ev.Retry > 0 {
		*retry = time.Duration(ev.Retry) * time.Millisecond
	}
	if len(bytes.TrimSpace(ev.Data)) == 0 {
		return nil, false // priming events and retry hints carry no message
	}
	if ev.Name != "" && ev.Name != "message" {
		log.Debug("ignoring SSE event", zap.String("event", ev.Name))
		return nil, false
	}
	return ev.Data, true
}

// Streamable is the Streamable HTTP transport (2025-03-26 and later).
type Streamable struct {
	cfg HTTPConfig
	log *zap.Logger
	lifecycle

	deliver DeliverFunc

	url   *url.URL    // cfg.URL, parsed once (nil: it does not parse)
	fixed http.Header // cfg.Headers, canonical, their values made once

	mu        sync.Mutex
	sessionID string
	version   mcp.Revision
	// The header values of sessionID and version, made when they change
	// rather than per request.
	sessionValue, versionValue []string
	detached                   bool // Close leaves the upstream session alive (Client.Detach)
	// streams ends the answer streams of legacy requests, which outlive
	// their callers (resumable): once a request is cancelled
	// (notifications/cancelled) nothing will read its answer, and a hung
	// upstream would otherwise hold its connection and reader for ever.
	// One entry per request in flight, removed when its stream ends.
	streams map[string]context.CancelFunc
	// chunks gathers the long events of every stream from this upstream
	// (a large tool result is one line), so each is allocated once.
	chunks sse.Chunks
}

// NewStreamable returns an unstarted Streamable HTTP transport.
func NewStreamable(cfg HTTPConfig) *Streamable {
	cfg.defaults()
	s := &Streamable{cfg: cfg, log: cfg.Logger, lifecycle: newLifecycle(), url: parseURL(cfg.URL), fixed: make(http.Header, len(cfg.Headers))}
	for k, v := range cfg.Headers {
		s.fixed[http.CanonicalHeaderKey(k)] = headerValue(v)
	}
	return s
}

// Start records where to deliver messages; HTTP needs no connection up front.
func (s *Streamable) Start(_ context.Context, deliver DeliverFunc) error {
	s.deliver = deliver
	return nil
}

func (s *Streamable) setProtocolVersion(v mcp.Revision) {
	s.mu.Lock()
	s.version, s.versionValue = v, headerValue(string(v))
	s.mu.Unlock()
}

func (s *Streamable) openStream() { s.goTracked(s.listen) }

// headers sets what every request to the upstream carries: the
// configured headers, the session and the negotiated version.
func (s *Streamable) headers(h http.Header) {
	for k, v := range s.fixed {
		h[k] = v
	}
	s.mu.Lock()
	if s.sessionID != "" {
		h[mcp.HeaderSessionID] = s.sessionValue
	}
	if s.version != "" {
		h[mcp.HeaderProtocolVersion] = s.versionValue
	}
	s.mu.Unlock()
}

// setSession records the upstream's session id.
func (s *Streamable) setSession(id string) {
	s.sessionID = id
	s.sessionValue = nil
	if id != "" {
		s.sessionValue = headerValue(id)
	}
}

// WithHeaders is upcall.WithHeaders: the Mcp-Param-* headers a request to
// a 2026-07-28 HTTP upstream carries.
func WithHeaders(ctx context.Context, h http.Header) context.Context {
	return upcall.WithHeaders(ctx, h)
}

// stateless reports whether the negotiated revision is a stateless one.
func (s *Streamable) stateless() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version.Stateless()
}

// mirrorHeaders sets the 2026-07-28 request headers that mirror the body
// (Mcp-Method, Mcp-Name) so intermediaries can route without parsing it.
func mirrorHeaders(h http.Header, facts Sent) {
	if facts.Method == "" {
		return
	}
	h.Set(mcp.HeaderMethod, facts.Method)
	if facts.HasName {
		h.Set(mcp.HeaderName, mcp.EncodeHeaderValue(facts.Name))
	}
}

// Send POSTs one message. A JSON answer is delivered before Send returns; an
// SSE answer is read on a goroutine owned by the transport.
func (s *Streamable) Send(ctx context.Context, msg []byte) error {
	return s.sendKnown(ctx, msg, readSent(msg))
}

// readSent reads of msg what sendKnown needs, for a sender that did not
// say (Send).
func readSent(msg []byte) Sent {
	facts := Sent{ID: requestID(msg), Cancels: cancelledRequest(msg)}
	if facts.Method, _ = rawjson.GetString(msg, "method"); facts.Method != "" {
		facts.Params, _ = rawjson.Get(msg, "params")
	}
	if field := mcp.NameHeaderField(facts.Method); field != "" {
		facts.Name, facts.HasName = rawjson.GetString(facts.Params, field)
	}
	return facts
}

// sendKnown is Send of a message the client made, told what it knows of it
// rather than reading the bytes it was just handed again.
func (s *Streamable) sendKnown(ctx context.Context, msg []byte, facts Sent) error {
	if err := s.Err(); err != nil {
		return err
	}
	// Whatever the upstream sends on this POST's stream belongs to this
	// request: that is how server→client requests and log messages find the
	// downstream call that caused them.
	related := facts.ID
	if ended := facts.Cancels; ended != "" {
		// After the cancellation is sent (or could not be): the upstream
		// has been told, and the call is over at the gateway.
		defer s.endStream(ended)
	}
	rctx, cancel, stop := s.requestContext(ctx)
	req, err := s.newPost(rctx, msg, 4+len(s.fixed)) // post.go
	if err != nil {
		cancel()
		return err
	}
	req.Header["Content-Type"] = valueJSON
	req.Header["Accept"] = valueAccept
	s.headers(req.Header)
	setTraceHeaders(ctx, req.Header)
	sent := req.Header.Get(mcp.HeaderSessionID)
	if s.stateless() {
		mirrorHeaders(req.Header, facts)
		if h, ok := upcall.HeadersFrom(ctx); ok {
			for k, v := range h {
				if mcp.IsParamHeader(k) {
					req.Header[http.CanonicalHeaderKey(k)] = v
				}
			}
		}
	}
	resp, err := s.post(req)
	var mt string // the answer's media type
	if err == nil {
		mt = mediaType(resp.Header)
	}
	// streamed: the request's own answer on an SSE stream, read by this
	// caller (answerstream.go).
	streamed := err == nil && related != nil && resp.StatusCode/100 == 2 && resp.StatusCode != http.StatusAccepted && mt == mcp.ContentTypeEventStream
	if !s.stateless() && !streamed {
		// Legacy: the answer stream outlives the caller (resumable, and the
		// spec says a disconnect is not a cancellation). 2026-07-28: closing
		// the stream is the cancellation, so it stays tied to the caller.
		// A request's own answer stream is read by its caller until the
		// answer (answerstream.go), and detached from it then.
		stop()
	}
	if err != nil {
		cancel()
		return fmt.Errorf("POST %s: %w", redactURL(s.cfg.URL), unwrapURLError(err))
	}
	if id := resp.Header.Get(mcp.HeaderSessionID); id != "" {
		s.mu.Lock()
		if s.sessionID == "" {
			s.setSession(id)
		}
		s.mu.Unlock()
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		resp.Body.Close()
		cancel()
		return nil
	case resp.StatusCode == http.StatusNotFound && sent != "":
		// The upstream forgot the session (restart, expiry): it cannot have
		// processed this message, so the client may initialize again and
		// resend it.
		resp.Body.Close()
		cancel()
		s.forgetSession(sent)
		return ErrSessionExpired
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		defer cancel()
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		// 2026-07-28 servers answer protocol errors with a 4xx status and a
		// JSON-RPC error body: that is the request's answer, not a transport
		// failure.
		if related != nil && mt == mcp.ContentTypeJSON {
			if id, ok := rawjson.Get(body, "id"); ok && string(id) == string(related) {
				if _, isErr := rawjson.Get(body, "error"); isErr {
					s.deliver(body, related)
					return nil
				}
			}
		}
		se := &StatusError{Status: resp.StatusCode, Body: string(bytes.TrimSpace(clipBytes(body, 512)))}
		if sent == "" && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) && opening(msg) {
			se.Hint = hintLegacySSE
		}
		return se
	}
	switch mt {
	case mcp.ContentTypeEventStream:
		if streamed {
			return s.readAnswer(rctx, cancel, stop, resp, related) // answerstream.go
		}
		// A stream that answers no request of ours (the reply to a
		// notification or response): whatever it carries, on a goroutine.
		started := s.goTracked(func() {
			defer cancel()
			// The closure is made here only: a JSON answer, the common
			// case, is delivered without one.
			deliver := func(b []byte) { s.deliver(b, related) }
			_, _, err := readEvents(resp.Body, s.cfg.MaxMessageBytes, &s.chunks, deliver, s.log)
			resp.Body.Close()
			if !errors.Is(err, io.EOF) && rctx.Err() == nil { // readEvents ends with io.EOF or a real error
				s.log.Warn("upstream response stream broke", zap.Error(err))
			}
		})
		if !started {
			resp.Body.Close()
			cancel()
			return errors.New("transport closed")
		}
		return nil
	default:
		defer cancel()
		defer resp.Body.Close()
		body, err := readBody(resp, s.cfg.MaxMessageBytes)
		if err != nil {
			return fmt.Errorf("reading upstream answer: %w", err)
		}
		if len(body) > s.cfg.MaxMessageBytes {
			return fmt.Errorf("upstream answer exceeds %d bytes", s.cfg.MaxMessageBytes)
		}
		if len(bytes.TrimSpace(body)) > 0 {
			s.deliver(body, related)
		}
		return nil
	}
}

// readBody reads a JSON answer of at most max bytes (a longer one is
// returned cut at max+1, for the caller to refuse). With a Content-Length
// it is read into a buffer of that size, once, instead of one grown as it
// comes (io.ReadAll's growth copies a 1 MiB answer several times).
func readBody(resp *http.Response, max int) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= int64(max) {
		body := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(io.LimitReader(resp.Body, int64(max)+1))
}

// trackStream records how to end request id's answer stream.
func (s *Streamable) trackStream(id jsonrpc.ID, cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams == nil {
		s.streams = map[string]context.CancelFunc{}
	}
	s.streams[string(id)] = cancel
}

func (s *Streamable) untrackStream(id jsonrpc.ID) {
	s.mu.Lock()
	delete(s.streams, string(id))
	s.mu.Unlock()
}

// endStream ends the answer stream of a cancelled request, if it is open.
func (s *Streamable) endStream(id string) {
	s.mu.Lock()
	cancel := s.streams[id]
	delete(s.streams, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// cancelledRequest returns the raw requestId of a notifications/cancelled
// message ("" for any other message).
func cancelledRequest(msg []byte) string {
	if m, _ := rawjson.Get(msg, "method"); string(m) != quotedCancelled {
		if !bytes.Contains(m, []byte{'\\'}) {
			return "" // (no string made: this runs for every message sent)
		}
		if s, _ := rawjson.GetString(msg, "method"); s != mcp.NotificationCancelled {
			return ""
		}
	}
	params, _ := rawjson.Get(msg, "params")
	id, ok := rawjson.Get(params, "requestId")
	if !ok {
		return ""
	}
	return string(id)
}

// quotedCancelled is notifications/cancelled as a JSON string token.
const quotedCancelled = `"` + mcp.NotificationCancelled + `"`

// streamLost is the answer to request id when the upstream closed its
// response stream before answering and the stream cannot be resumed. The
// request may have run upstream, so it is not sent again.
func streamLost(id jsonrpc.ID) []byte {
	b, _ := jsonrpc.Encode(jsonrpc.NewError(id, &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable,
		Message: "the upstream closed the request's response stream before answering, and the stream cannot be resumed; the request may or may not have run there"}))
	return b
}

// resume picks up a request's response stream that the upstream closed
// before answering (2025-11-25 polling, or a broken connection): GET with
// Last-Event-ID until the answer arrives, a few times at most. Each attempt
// waits the reconnection time the server last asked for ("retry:", which a
// client must honour: SEP-1699), or a growing backoff when it named none;
// a server asking for more than maxRetryWait is not resumed at all rather
// than early.
func (s *Streamable) resume(ctx context.Context, lastID string, retry time.Duration, deliver func([]byte), answered *bool) {
	for attempt := 0; attempt < maxResumeAttempts && !*answered; attempt++ {
		wait := time.Duration(attempt*250+250) * time.Millisecond
		if retry > 0 {
			wait = retry
		}
		if wait > maxRetryWait {
			s.log.Warn("upstream asks for a reconnection delay longer than mcpgw waits; not resuming the response stream",
				zap.Duration("retry", retry), zap.Duration("max", maxRetryWait))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", mcp.ContentTypeEventStream)
		req.Header.Set("Last-Event-ID", lastID)
		s.headers(req.Header)
		resp, err := send(s.cfg.Client, req)
		if err != nil {
			continue
		}
		if resp.StatusCode != http.StatusOK || mediaType(resp.Header) != mcp.ContentTypeEventStream {
			resp.Body.Close()
			s.log.Debug("upstream refused to resume a response stream", zap.Int("status", resp.StatusCode))
			return
		}
		id, r, _ := readEvents(resp.Body, s.cfg.MaxMessageBytes, &s.chunks, deliver, s.log)
		resp.Body.Close()
		if id != "" {
			lastID = id
		}
		if r > 0 {
			retry = r
		}
	}
}

// maxResumeAttempts bounds the GETs that resume one response stream, and
// maxRetryWait the reconnection delay mcpgw honours ("retry:"); a longer
// one would hold the call past any sensible timeout.
const (
	maxResumeAttempts = 5
	maxRetryWait      = time.Minute
)

// ErrSessionExpired is returned by Send when a Streamable HTTP upstream no
// longer knows the session (HTTP 404): the message was not processed.
var ErrSessionExpired = errors.New("upstream session expired (HTTP 404)")

// forgetSession drops the session id if it is still the one a 404 named.
func (s *Streamable) forgetSession(id string) {
	s.mu.Lock()
	if s.sessionID == id {
		s.setSession("")
	}
	s.mu.Unlock()
}

// session is the upstream's Mcp-Session-Id, "" before it gave one
// (sessionCarrier).
func (s *Streamable) session() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// adoptSession takes id, an upstream session initialized elsewhere
// (another replica's), as this connection's (sessionCarrier).
func (s *Streamable) adoptSession(id string) {
	s.mu.Lock()
	s.setSession(id)
	s.mu.Unlock()
}

// detach makes Close leave the upstream session alive: no DELETE
// (sessionCarrier; Client.Detach).
func (s *Streamable) detach() {
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
}

// callStreams: each request's answer, and what the upstream sends about
// it, comes on the POST's own response stream (callStreamer).
func (s *Streamable) callStreams() {}

// listen holds the GET stream open for server-initiated messages,
// reconnecting with backoff; a 405 means the upstream offers none.
func (s *Streamable) listen() {
	backoff := 500 * time.Millisecond
	lastID := ""
	var retry time.Duration // the server's "retry:", the least wait before reconnecting
	for s.ctx.Err() == nil {
		req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.cfg.URL, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", mcp.ContentTypeEventStream)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		s.headers(req.Header)
		resp, err := send(s.cfg.Client, req)
		if err == nil {
			switch {
			case resp.StatusCode == http.StatusMethodNotAllowed:
				resp.Body.Close()
				return
			case resp.StatusCode == http.StatusOK && mediaType(resp.Header) == mcp.ContentTypeEventStream:
				backoff = 500 * time.Millisecond
				id, r, _ := readEvents(resp.Body, s.cfg.MaxMessageBytes, &s.chunks, func(b []byte) { s.deliver(b, nil) }, s.log)
				if id != "" {
					lastID = id
				}
				if r > 0 {
					retry = min(r, maxRetryWait)
				}
				resp.Body.Close()
			case resp.StatusCode == http.StatusNotFound:
				// The session expired; the next request initializes a new
				// one and reopens this stream (health probes make sure a
				// request comes).
				resp.Body.Close()
				s.log.Info("upstream session expired on the GET stream; a new one is made on the next request")
				return
			default:
				s.log.Debug("upstream GET stream refused", zap.Int("status", resp.StatusCode))
				resp.Body.Close()
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(max(backoff, retry)):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// Close ends the upstream session with DELETE and stops every stream.
func (s *Streamable) Close() error {
	s.fail(errors.New("closed by the gateway"))
	s.mu.Lock()
	id := s.sessionID
	if s.detached {
		id = ""
	}
	s.mu.Unlock()
	if id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.cfg.URL, nil)
		if err == nil {
			s.headers(req.Header)
			if resp, err := send(s.cfg.Client, req); err == nil {
				resp.Body.Close()
			}
		}
		cancel()
	}
	s.stop()
	return nil
}

// LegacySSE is the 2024-11-05 HTTP+SSE transport: a long-lived GET stream
// that first names the POST endpoint, then carries every server message.
type LegacySSE struct {
	cfg HTTPConfig
	log *zap.Logger
	lifecycle

	endpoint string
	chunks   sse.Chunks // gathers the stream's long events (sse.Chunks)
}

// NewLegacySSE returns an unstarted legacy HTTP+SSE transport.
func NewLegacySSE(cfg HTTPConfig) *LegacySSE {
	cfg.defaults()
	return &LegacySSE{cfg: cfg, log: cfg.Logger, lifecycle: newLifecycle()}
}

// Start opens the event stream and waits for the endpoint event.
func (l *LegacySSE) Start(ctx context.Context, deliver DeliverFunc) error {
	rctx, cancel, stop := l.requestContext(ctx)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, l.cfg.URL, nil)
	if err != nil {
		cancel()
		return err
	}
	req.Header.Set("Accept", mcp.ContentTypeEventStream)
	for k, v := range l.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := send(l.cfg.Client, req)
	if err != nil {
		stop()
		cancel()
		return fmt.Errorf("GET %s: %w", redactURL(l.cfg.URL), unwrapURLError(err))
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header) != mcp.ContentTypeEventStream {
		stop()
		body := readSnippet(resp.Body)
		resp.Body.Close()
		cancel()
		return &StatusError{Status: resp.StatusCode, Body: body, Hint: hintStreamable}
	}
	rd := sse.NewReaderChunks(resp.Body, l.cfg.MaxMessageBytes, &l.chunks)
	ev, err := rd.Next()
	stop()
	if err != nil || ev.Name != "endpoint" {
		resp.Body.Close()
		cancel()
		if err == nil {
			err = fmt.Errorf("first event was %q", ev.Name)
		}
		return fmt.Errorf("legacy SSE upstream did not announce its endpoint: %w; %s", err, hintStreamable)
	}
	ep, err := resolveEndpoint(l.cfg.URL, string(ev.Data))
	if err != nil {
		resp.Body.Close()
		cancel()
		return err
	}
	l.endpoint = ep
	l.goTracked(func() { // cannot be refused: Close has not been called yet
		defer cancel()
		defer resp.Body.Close()
		for {
			ev, err := rd.Next()
			if err != nil {
				if rctx.Err() == nil {
					l.fail(fmt.Errorf("legacy SSE stream ended: %v", err))
				}
				return
			}
			if (ev.Name == "" || ev.Name == "message") && len(bytes.TrimSpace(ev.Data)) > 0 {
				deliver(ev.Data, nil) // one stream for everything: no association
			}
		}
	})
	return nil
}

// resolveEndpoint resolves the announced endpoint against the stream URL and
// refuses another origin: the upstream must not redirect our messages (and
// credentials) elsewhere.
func resolveEndpoint(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("legacy SSE endpoint %q is not a URL: %w", ref, err)
	}
	u := b.ResolveReference(r)
	if u.Scheme != b.Scheme || u.Host != b.Host {
		return "", fmt.Errorf("legacy SSE endpoint %q is on another origin than %s; refusing to send messages there", ref, redactURL(base))
	}
	return u.String(), nil
}

// Send POSTs one message to the announced endpoint; answers come on the stream.
func (l *LegacySSE) Send(ctx context.Context, msg []byte) error {
	if err := l.Err(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(msg))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mcp.ContentTypeJSON)
	for k, v := range l.cfg.Headers {
		req.Header.Set(k, v)
	}
	setTraceHeaders(ctx, req.Header)
	resp, err := send(l.cfg.Client, req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", redactURL(l.endpoint), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Status: resp.StatusCode, Body: readSnippet(resp.Body)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}

// Close ends the stream.
func (l *LegacySSE) Close() error {
	l.fail(errors.New("closed by the gateway"))
	l.stop()
	return nil
}

func clipBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// requestID returns the id of msg when it is a request, else nil.
func requestID(msg []byte) jsonrpc.ID {
	if _, ok := rawjson.Get(msg, "method"); !ok {
		return nil
	}
	id, ok := rawjson.Get(msg, "id")
	if !ok {
		return nil
	}
	return jsonrpc.ID(id)
}

// unwrapURLError drops the *url.Error wrapper (method and URL, which the
// caller names once itself, redacted) around a transport's error.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL drops the query and userinfo, where credentials tend to hide.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}
