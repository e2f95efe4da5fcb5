package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// The downstream clients: one per wire era the gateway serves.
//
//	streamable  2025-03-26, 2025-06-18, 2025-11-25: initialize, Mcp-Session-Id,
//	            a GET stream, answers as JSON or on the POST's SSE stream
//	            (resumed with GET and Last-Event-ID when it breaks), DELETE
//	legacy      2024-11-05 HTTP+SSE: GET <route>/sse, POST the announced endpoint,
//	            every answer on the one stream
//	stateless   2026-07-28: no session; _meta carries the revision and the
//	            client's capabilities, Mcp-Method/Mcp-Name mirror the body
//
// Each one checks what reaches it: a response to another id, progress for
// another token or any response on a stream that should carry none is
// crossed; a second response to one id is a duplicate.

const maxEvent = 32 << 20

// call is one request a worker sends, with what its answer must show.
type call struct {
	label  string // for the report: "demo.echo", "fhttp.drop", ...
	method string
	params map[string]any
	// name is what Mcp-Name mirrors (tools/call and prompts/get name,
	// resources/read uri).
	name string
	// check verifies a successful result (nil: any result is fine); an
	// errCrossed from it means the answer was another request's.
	check func(result json.RawMessage) error
	// wellBehaved calls (the demo upstream) must succeed.
	wellBehaved bool
	// progress, when set, is the progress token sent in _meta.
	progress any
	// cancelAfter > 0 cancels the request after that long: with
	// notifications/cancelled on sessions, by closing the stream when
	// stateless.
	cancelAfter time.Duration
	// disconnect closes a Streamable POST stream after its first event with
	// an id, and resumes it with GET and Last-Event-ID.
	disconnect bool
}

// errCrossed marks a check failure that shows the answer belongs to
// another request.
var errCrossed = errors.New("crossed")

// reply is what became of one request.
type reply struct {
	accepted  bool // the gateway took it (not refused at the HTTP level)
	status    int  // the POST's HTTP status
	answers   int  // responses carrying the request's id
	resp      *jsonrpc.Message
	crossed   []string // what arrived that belongs to someone else
	resumed   int      // GETs with Last-Event-ID made
	abandoned bool     // the client closed the stream itself (stateless cancel)
	cancelled bool
	lost      bool  // the session is gone (404 or its stream ended)
	err       error // transport trouble, for the report
}

// session is one downstream client session.
type session interface {
	revision() string
	do(ctx context.Context, c *call) *reply
	close()
	lost() bool
}

// client holds what every session shares.
type client struct {
	base string // http://127.0.0.1:PORT
	hc   *http.Client
	st   *stats
	seq  atomic.Int64 // request ids, unique across sessions
}

func (cl *client) nextID() json.RawMessage {
	n := cl.seq.Add(1)
	if n%3 == 0 { // ids of both types: the gateway must give each back as sent
		return json.RawMessage(fmt.Sprintf(`"r-%d"`, n))
	}
	return json.RawMessage(fmt.Sprint(n))
}

// paramsJSON is c's params, with the progress token (and, for stateless
// requests, the revision and capabilities) in _meta.
func (c *call) paramsJSON(stateless bool) json.RawMessage {
	p := map[string]any{}
	for k, v := range c.params {
		p[k] = v
	}
	meta := map[string]any{}
	if c.progress != nil {
		meta["progressToken"] = c.progress
	}
	if stateless {
		meta[mcp.MetaProtocolVersion] = string(mcp.Version20260728)
		meta[mcp.MetaClientCapabilities] = map[string]any{}
		meta[mcp.MetaClientInfo] = map[string]string{"name": "mcpgw-soak", "version": "0"}
	}
	if len(meta) > 0 {
		p["_meta"] = meta
	}
	b, _ := json.Marshal(p)
	return b
}

func encodeRequest(id json.RawMessage, method string, params json.RawMessage) []byte {
	b, _ := jsonrpc.Encode(jsonrpc.NewRequest(jsonrpc.ID(id), method, params))
	return b
}

func encodeNotification(method string, params any) []byte {
	p, _ := json.Marshal(params)
	b, _ := jsonrpc.Encode(jsonrpc.NewNotification(method, p))
	return b
}

// sameToken reports whether a progress notification's token is want.
func sameToken(params json.RawMessage, want any) bool {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	w, _ := json.Marshal(want)
	return bytes.Equal(bytes.TrimSpace(p.Token), w)
}

// readStream reads one answer stream: a JSON body or SSE events. It
// records our responses and anything crossed in rep and returns the last
// event id. stopAfterID closes the stream at the first event with an id
// (the disconnect test).
func readStream(resp *http.Response, id json.RawMessage, c *call, rep *reply, stopAfterID bool) (lastID string, err error) {
	mt := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(mt, mcp.ContentTypeEventStream) {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxEvent))
		if err != nil {
			return "", err
		}
		classify(body, id, c, rep)
		return "", nil
	}
	rd := sse.NewReader(resp.Body, maxEvent)
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return rd.LastEventID(), err
		}
		if len(bytes.TrimSpace(ev.Data)) > 0 {
			classify(ev.Data, id, c, rep)
		}
		if stopAfterID && rd.LastEventID() != "" && rep.answers == 0 {
			return rd.LastEventID(), nil
		}
	}
}

// classify sorts one message arriving on a request's own stream.
func classify(data []byte, id json.RawMessage, c *call, rep *reply) {
	m, err := jsonrpc.Parse(data)
	if err != nil {
		rep.crossed = append(rep.crossed, fmt.Sprintf("unparseable message %.120q", data))
		return
	}
	switch m.Kind() {
	case jsonrpc.KindResponse:
		if bytes.Equal(m.ID, id) {
			rep.answers++
			if rep.resp == nil {
				rep.resp = m
			}
			return
		}
		rep.crossed = append(rep.crossed, fmt.Sprintf("response to id %s on the stream of %s", m.ID, id))
	case jsonrpc.KindNotification:
		if m.Method == mcp.NotificationProgress && (c.progress == nil || !sameToken(m.Params, c.progress)) {
			rep.crossed = append(rep.crossed, fmt.Sprintf("progress %.120s on the stream of %s (token %v)", m.Params, id, c.progress))
		}
	}
}

// postStream serves do for the Streamable and stateless clients: POST,
// read the answer, resume a broken stream when the session allows.
func (cl *client) postStream(ctx context.Context, url string, hdr http.Header, id json.RawMessage, body []byte, c *call, cancel func(), resume func(ctx context.Context, lastID string) (*http.Response, error)) *reply {
	rep := &reply{}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	if c.cancelAfter > 0 {
		var cancelled atomic.Bool
		fired := make(chan struct{})
		t := time.AfterFunc(c.cancelAfter, func() {
			defer close(fired)
			cancelled.Store(true)
			cancel()
		})
		defer func() {
			if !t.Stop() {
				<-fired
			}
			rep.cancelled = cancelled.Load()
		}()
	}
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header = hdr.Clone()
	resp, err := cl.hc.Do(req)
	if err != nil {
		rep.err = err
		// The body may have reached the gateway; it owes an answer the
		// connection can no longer carry. Counted, not guessed.
		rep.accepted = true
		return rep
	}
	rep.status = resp.StatusCode
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		// A JSON-RPC error naming our id is the answer (2026-07-28 sends
		// them with 4xx); anything else is a refusal.
		if m, err := jsonrpc.Parse(b); err == nil && bytes.Equal(m.ID, id) {
			rep.accepted = true
			classify(b, id, c, rep)
			return rep
		}
		rep.lost = resp.StatusCode == http.StatusNotFound
		rep.err = fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
		return rep
	}
	rep.accepted = true
	lastID, err := readStream(resp, id, c, rep, c.disconnect)
	resp.Body.Close()
	for rep.answers == 0 && resume != nil && lastID != "" && rep.resumed < 4 && ctx.Err() == nil {
		rep.resumed++
		r, err := resume(ctx, lastID)
		if err != nil {
			rep.err = err
			break
		}
		if r.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
			r.Body.Close()
			rep.err = fmt.Errorf("resume: HTTP %d: %.200s", r.StatusCode, b)
			rep.lost = r.StatusCode == http.StatusNotFound
			break
		}
		if id, _ := readStream(r, id, c, rep, false); id != "" {
			lastID = id
		}
		r.Body.Close()
	}
	if err != nil && rep.answers == 0 && rep.err == nil {
		rep.err = err
	}
	return rep
}

// streamable is a 2025-03-26 … 2025-11-25 session.
type streamable struct {
	cl      *client
	route   string // "/mcp"
	rev     string
	id      string
	getStop context.CancelFunc
	getDone chan struct{}
	gone    atomic.Bool
}

func (cl *client) openStreamable(ctx context.Context, route, rev string) (*streamable, error) {
	s := &streamable{cl: cl, route: route, rev: rev}
	init := encodeRequest(json.RawMessage(`0`), mcp.MethodInitialize, mustJSON(map[string]any{
		"protocolVersion": rev, "capabilities": map[string]any{}, "clientInfo": map[string]string{"name": "mcpgw-soak", "version": "0"},
	}))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cl.base+route, bytes.NewReader(init))
	req.Header = s.headers(false)
	resp, err := cl.hc.Do(req)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	s.id = resp.Header.Get(mcp.HeaderSessionID)
	if resp.StatusCode != http.StatusOK || s.id == "" {
		return nil, fmt.Errorf("initialize %s: HTTP %d, session %q: %.200s", rev, resp.StatusCode, s.id, body)
	}
	var m struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &m) != nil || m.Result.ProtocolVersion != rev {
		return nil, fmt.Errorf("initialize %s negotiated %q: %.200s", rev, m.Result.ProtocolVersion, body)
	}
	if err := s.notify(ctx, mcp.NotificationInitialized, map[string]any{}); err != nil {
		return nil, err
	}
	gctx, stop := context.WithCancel(context.Background())
	s.getStop, s.getDone = stop, make(chan struct{})
	go func() {
		defer close(s.getDone)
		s.listen(gctx)
	}()
	return s, nil
}

func (s *streamable) revision() string { return s.rev }
func (s *streamable) lost() bool       { return s.gone.Load() }

func (s *streamable) headers(withSession bool) http.Header {
	h := http.Header{}
	h.Set("Content-Type", mcp.ContentTypeJSON)
	h.Set("Accept", "application/json, text/event-stream")
	if withSession {
		h.Set(mcp.HeaderSessionID, s.id)
		if s.rev != string(mcp.Version20250326) {
			h.Set(mcp.HeaderProtocolVersion, s.rev)
		}
	}
	return h
}

func (s *streamable) notify(ctx context.Context, method string, params any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.cl.base+s.route, bytes.NewReader(encodeNotification(method, params)))
	req.Header = s.headers(true)
	resp, err := s.cl.hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		if resp.StatusCode == http.StatusNotFound {
			s.gone.Store(true)
		}
		return fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	return nil
}

// listen holds the session's GET stream: notifications are welcome, a
// response is crossed (nothing on it answers a request of ours).
func (s *streamable) listen(ctx context.Context) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.cl.base+s.route, nil)
		req.Header = s.headers(true)
		req.Header.Set("Accept", mcp.ContentTypeEventStream)
		resp, err := s.cl.hc.Do(req)
		if err != nil {
			return
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound {
				s.gone.Store(true)
			}
			return
		}
		rd := sse.NewReader(resp.Body, maxEvent)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if len(bytes.TrimSpace(ev.Data)) == 0 {
				continue
			}
			m, err := jsonrpc.Parse(ev.Data)
			switch {
			case err != nil:
				s.cl.st.crossedOn("GET stream", fmt.Sprintf("unparseable %.120q", ev.Data))
			case m.Kind() == jsonrpc.KindResponse:
				s.cl.st.crossedOn("GET stream", fmt.Sprintf("response to id %s", m.ID))
			case m.Method == mcp.NotificationProgress:
				s.cl.st.crossedOn("GET stream", fmt.Sprintf("progress %.120s", m.Params))
			default:
				s.cl.st.note(m.Method)
			}
		}
		resp.Body.Close()
		select { // the stream ended (a reload, say): come back
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *streamable) do(ctx context.Context, c *call) *reply {
	id := s.cl.nextID()
	body := encodeRequest(id, c.method, c.paramsJSON(false))
	cancel := func() {
		ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = s.notify(ctx, mcp.NotificationCancelled, map[string]any{"requestId": id, "reason": "soak: cancelled"})
	}
	resume := func(ctx context.Context, lastID string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.cl.base+s.route, nil)
		req.Header = s.headers(true)
		req.Header.Set("Accept", mcp.ContentTypeEventStream)
		req.Header.Set("Last-Event-ID", lastID)
		return s.cl.hc.Do(req)
	}
	rep := s.cl.postStream(ctx, s.cl.base+s.route, s.headers(true), id, body, c, cancel, resume)
	if rep.lost {
		s.gone.Store(true)
	}
	return rep
}

func (s *streamable) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, s.cl.base+s.route, nil)
	req.Header = s.headers(true)
	if resp, err := s.cl.hc.Do(req); err == nil {
		resp.Body.Close()
	}
	s.getStop()
	<-s.getDone
}

// stateless is a 2026-07-28 client: every request stands alone.
type stateless struct {
	cl    *client
	route string
}

func (s *stateless) revision() string { return string(mcp.Version20260728) }
func (s *stateless) lost() bool       { return false }
func (s *stateless) close()           {}

func (s *stateless) do(ctx context.Context, c *call) *reply {
	id := s.cl.nextID()
	body := encodeRequest(id, c.method, c.paramsJSON(true))
	h := http.Header{}
	h.Set("Content-Type", mcp.ContentTypeJSON)
	h.Set("Accept", "application/json, text/event-stream")
	h.Set(mcp.HeaderProtocolVersion, string(mcp.Version20260728))
	h.Set(mcp.HeaderMethod, c.method)
	if c.name != "" {
		h.Set(mcp.HeaderName, c.name)
	}
	// Closing the stream is a 2026 request's cancellation.
	ctx, abandon := context.WithCancel(ctx)
	defer abandon()
	rep := s.cl.postStream(ctx, s.cl.base+s.route, h, id, body, c, abandon, nil)
	if rep.cancelled && rep.answers == 0 {
		rep.abandoned, rep.err = true, nil
	}
	return rep
}

// legacy is a 2024-11-05 HTTP+SSE session: one stream carries every
// answer, matched to requests by id.
type legacy struct {
	cl       *client
	route    string
	endpoint string
	stop     context.CancelFunc
	done     chan struct{}
	gone     atomic.Bool

	mu       sync.Mutex
	pending  map[string]*legacyPending // by id
	finished map[string]bool           // ids answered lately, for duplicates
	order    []string
	tokens   map[string]bool // progress tokens (JSON) of calls in flight
	sent     map[string]bool // progress tokens sent lately
	sentList []string
}

type legacyPending struct {
	c   *call
	rep *reply
	got chan struct{} // closed at the first answer
}

func (cl *client) openLegacy(ctx context.Context, route string) (*legacy, error) {
	l := &legacy{cl: cl, route: route, pending: map[string]*legacyPending{}, finished: map[string]bool{}, tokens: map[string]bool{}, sent: map[string]bool{}, done: make(chan struct{})}
	sctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, cl.base+route+"/sse", nil)
	req.Header.Set("Accept", mcp.ContentTypeEventStream)
	resp, err := cl.hc.Do(req)
	if err != nil {
		stop()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		stop()
		return nil, fmt.Errorf("GET %s/sse: HTTP %d", route, resp.StatusCode)
	}
	rd := sse.NewReader(resp.Body, maxEvent)
	ev, err := rd.Next()
	if err != nil || ev.Name != "endpoint" {
		resp.Body.Close()
		stop()
		return nil, fmt.Errorf("GET %s/sse: no endpoint event (%v)", route, err)
	}
	ep, err := url.Parse(string(ev.Data))
	if err != nil {
		resp.Body.Close()
		stop()
		return nil, err
	}
	base, _ := url.Parse(cl.base)
	l.endpoint = base.ResolveReference(ep).String()
	go func() {
		defer close(l.done)
		defer resp.Body.Close()
		l.read(rd)
	}()
	rep := l.do(ctx, &call{label: "initialize", method: mcp.MethodInitialize, params: map[string]any{
		"protocolVersion": string(mcp.Version20241105), "capabilities": map[string]any{}, "clientInfo": map[string]string{"name": "mcpgw-soak", "version": "0"},
	}})
	if rep.resp == nil || rep.resp.Error != nil {
		l.close()
		return nil, fmt.Errorf("legacy initialize: %v %+v", rep.err, rep.resp)
	}
	if err := l.post(ctx, encodeNotification(mcp.NotificationInitialized, map[string]any{})); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

func (l *legacy) revision() string { return string(mcp.Version20241105) }
func (l *legacy) lost() bool       { return l.gone.Load() }

func (l *legacy) read(rd *sse.Reader) {
	defer l.gone.Store(true)
	for {
		ev, err := rd.Next()
		if err != nil {
			return
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			continue
		}
		m, err := jsonrpc.Parse(ev.Data)
		if err != nil {
			l.cl.st.crossedOn("legacy stream", fmt.Sprintf("unparseable %.120q", ev.Data))
			continue
		}
		switch {
		case m.Kind() == jsonrpc.KindResponse:
			key := string(m.ID)
			l.mu.Lock()
			p := l.pending[key]
			switch {
			case p != nil:
				p.rep.answers++
				if p.rep.resp == nil {
					p.rep.resp = m
					close(p.got)
				}
			case l.finished[key]:
				l.cl.st.duplicate(fmt.Sprintf("legacy stream: a second response to id %s", key))
			default:
				l.cl.st.crossedOn("legacy stream", fmt.Sprintf("response to unknown id %s", key))
			}
			l.mu.Unlock()
		case m.Method == mcp.NotificationProgress:
			var pp struct {
				Token json.RawMessage `json:"progressToken"`
			}
			_ = json.Unmarshal(m.Params, &pp)
			key := bytes.TrimSpace(pp.Token)
			l.mu.Lock()
			inFlight, sentHere := l.tokens[string(key)], l.sent[string(key)]
			l.mu.Unlock()
			switch {
			case inFlight:
			case sentHere:
				l.cl.st.late() // progress of a call of ours already answered
			default:
				l.cl.st.crossedOn("legacy stream", fmt.Sprintf("progress for a token this session never sent: %s", pp.Token))
			}
		case m.Kind() == jsonrpc.KindNotification:
			l.cl.st.note(m.Method)
		}
	}
}

func (l *legacy) post(ctx context.Context, body []byte) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(body))
	req.Header.Set("Content-Type", mcp.ContentTypeJSON)
	resp, err := l.cl.hc.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		if resp.StatusCode == http.StatusNotFound {
			l.gone.Store(true)
		}
		return &statusError{resp.StatusCode, string(b)}
	}
	return nil
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %.200s", e.status, e.body) }

func (l *legacy) do(ctx context.Context, c *call) *reply {
	id := l.cl.nextID()
	key := string(id)
	p := &legacyPending{c: c, rep: &reply{}, got: make(chan struct{})}
	var tok string
	if c.progress != nil {
		b, _ := json.Marshal(c.progress)
		tok = string(b)
	}
	l.mu.Lock()
	l.pending[key] = p
	if tok != "" {
		l.tokens[tok] = true
		l.sent[tok] = true
		l.sentList = append(l.sentList, tok)
		if len(l.sentList) > 4096 {
			delete(l.sent, l.sentList[0])
			l.sentList = l.sentList[1:]
		}
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.pending, key)
		delete(l.tokens, tok)
		l.finished[key] = true
		l.order = append(l.order, key)
		if len(l.order) > 4096 {
			delete(l.finished, l.order[0])
			l.order = l.order[1:]
		}
		l.mu.Unlock()
	}()
	if err := l.post(ctx, encodeRequest(id, c.method, c.paramsJSON(false))); err != nil {
		var se *statusError
		if errors.As(err, &se) {
			p.rep.status = se.status
			p.rep.lost = se.status == http.StatusNotFound
		} else {
			p.rep.accepted = true // it may have been read: an answer is owed
		}
		p.rep.err = err
		return p.snapshot(&l.mu)
	}
	p.rep.accepted, p.rep.status = true, http.StatusAccepted
	var cancelC <-chan time.Time
	if c.cancelAfter > 0 {
		t := time.NewTimer(c.cancelAfter)
		defer t.Stop()
		cancelC = t.C
	}
	for {
		select {
		case <-p.got:
			// Linger briefly: a duplicate right behind the answer is counted
			// against this request, not as unknown.
			time.Sleep(20 * time.Millisecond)
			return p.snapshot(&l.mu)
		case <-cancelC:
			cancelC = nil
			var stop context.CancelFunc
			ctx, stop = context.WithTimeout(ctx, 10*time.Second) // an answer to a cancelled call is not owed for ever
			defer stop()
			l.mu.Lock()
			p.rep.cancelled = true
			l.mu.Unlock()
			nctx, nstop := context.WithTimeout(context.Background(), 10*time.Second)
			_ = l.post(nctx, encodeNotification(mcp.NotificationCancelled, map[string]any{"requestId": id, "reason": "soak: cancelled"}))
			nstop()
		case <-l.done:
			l.mu.Lock()
			p.rep.lost = true
			p.rep.err = errors.New("the legacy SSE stream ended")
			l.mu.Unlock()
			return p.snapshot(&l.mu)
		case <-ctx.Done():
			l.mu.Lock()
			p.rep.err = ctx.Err()
			l.mu.Unlock()
			return p.snapshot(&l.mu)
		}
	}
}

// snapshot copies the reply under the session's lock (the reader writes it).
func (p *legacyPending) snapshot(mu *sync.Mutex) *reply {
	mu.Lock()
	defer mu.Unlock()
	r := *p.rep
	return &r
}

func (l *legacy) close() {
	l.stop()
	<-l.done
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
