package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	legacyVersion    = "2025-11-25"
	statelessVersion = "2026-07-28"
	statelessMeta    = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
)

// endpoint is one way to reach the echo server: its MCP URL, what its echo
// tool is called there, and the process in the middle (nil: direct).
type endpoint struct {
	name   string
	url    string
	tool   string
	middle *child
}

// callTimeout bounds one call of the load generator.
const callTimeout = 60 * time.Second

// caller is the load generator's HTTP side: net/http for setting up
// (sessions, listings) and a keep-alive wireConn for every worker's
// measured calls, so no measured call opens a connection.
type caller struct {
	hc        *http.Client
	ids       atomic.Int64
	tlsConfig *tls.Config // https endpoints' (the tls scenario; trust)

	mu   sync.Mutex
	idle map[string][]*wireConn // by URL: kept between runs, as net/http's pool would
}

// keepIdle is how long a connection may sit unused between runs and still
// be taken: well inside mcpgw's idle timeout (2 minutes), so that no
// measured or warm-up call meets a connection its server has closed (a
// call that fails is counted, never retried).
const keepIdle = time.Minute

// conn is a kept connection to url, or a new one (dialled by its first call).
func (c *caller) conn(url string) (*wireConn, error) {
	c.mu.Lock()
	for l := c.idle[url]; len(l) > 0; l = c.idle[url] {
		wc := l[len(l)-1]
		c.idle[url] = l[:len(l)-1]
		if time.Since(wc.used) > keepIdle {
			wc.close()
			continue
		}
		c.mu.Unlock()
		return wc, nil
	}
	c.mu.Unlock()
	return newWireConn(url, callTimeout, c.tlsConfig)
}

// release keeps wc for the next run at its URL; the idle connections are
// at most the largest concurrency run, and closeIdle ends them.
func (c *caller) release(wc *wireConn) {
	if wc.c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle == nil {
		c.idle = map[string][]*wireConn{}
	}
	c.idle[wc.url] = append(c.idle[wc.url], wc)
}

// closeIdle closes the kept connections.
func (c *caller) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.idle {
		for _, wc := range l {
			wc.close()
		}
	}
	c.idle = nil
	c.hc.CloseIdleConnections()
}

func newCaller() *caller {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 4096, 4096
	tr.DisableCompression = true
	return &caller{hc: &http.Client{Transport: tr, Timeout: callTimeout}}
}

// post sends one JSON-RPC message and reads the whole answer into buf.
func (c *caller) post(ctx context.Context, url string, body []byte, h http.Header, buf *bytes.Buffer) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	buf.Reset()
	_, err = io.Copy(buf, resp.Body)
	resp.Body.Close()
	return resp, err
}

// headers are a call's request headers; session "" is a stateless request.
func headers(session, tool string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	if session != "" {
		h["Mcp-Session-Id"] = []string{session}
		h["Mcp-Protocol-Version"] = []string{legacyVersion}
	} else {
		h["Mcp-Protocol-Version"] = []string{statelessVersion}
		h["Mcp-Method"] = []string{"tools/call"}
		if tool != "" {
			h["Mcp-Name"] = []string{tool}
		}
	}
	return h
}

// openSession makes a legacy session: initialize, then initialized.
func (c *caller) openSession(ctx context.Context, url string) (string, error) {
	var buf bytes.Buffer
	init := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + legacyVersion + `","capabilities":{},"clientInfo":{"name":"mcpgw-bench","version":"1"}}}`)
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	resp, err := c.post(ctx, url, init, h, &buf)
	if err != nil {
		return "", err
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		return "", fmt.Errorf("initialize at %s: status %d, session %q: %.300s", url, resp.StatusCode, sid, buf.Bytes())
	}
	resp, err = c.post(ctx, url, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), http.Header{
		"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {legacyVersion},
	}, &buf)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("initialized at %s: status %d: %.300s", url, resp.StatusCode, buf.Bytes())
	}
	return sid, nil
}

// callBody appends a tools/call of tool with args to dst.
func callBody(dst []byte, id int64, tool, args string, stateless bool) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":"tools/call","params":{"name":"`...)
	dst = append(dst, tool...)
	dst = append(dst, `","arguments":`...)
	dst = append(dst, args...)
	if stateless {
		dst = append(dst, ',')
		dst = append(dst, statelessMeta...)
	}
	return append(dst, "}}"...)
}

// payload returns the JSON-RPC message of an answer: the body itself, or
// the last data of an SSE stream.
func payload(body []byte) []byte {
	t := bytes.TrimLeft(body, " \r\n\t")
	if len(t) > 0 && t[0] == '{' {
		return t
	}
	var last []byte
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			last = bytes.TrimSpace(d)
		}
	}
	return last
}

// checkResult fails unless msg is a successful tool result.
func checkResult(msg []byte, want []byte) error {
	if !bytes.Contains(msg, []byte(`"result"`)) || bytes.Contains(msg, []byte(`"isError":true`)) || !bytes.Contains(msg, want) {
		return fmt.Errorf("not the expected result: %.300s", msg)
	}
	return nil
}

// load is one closed-loop run's parameters.
type load struct {
	conc      int
	sessions  []string // legacy session ids; empty: stateless
	tool      string
	args      string
	want      []byte // the result must contain this
	dur       time.Duration
	calls     int // when > 0, stop after this many calls instead of dur
	stateless bool
	bearer    string // when set, sent as Authorization: Bearer
	// spread, when set, replaces run's url: worker w calls spread[w%len],
	// each over its own connection (the fleet's replicas without a
	// balancer process, as a balancer in the kernel spreads connections).
	spread []string
}

// result is what one run measured.
type result struct {
	lat    []time.Duration
	wall   time.Duration
	errs   int
	errMsg string
}

// run drives url with l.conc workers until the time or call budget ends.
func (c *caller) run(ctx context.Context, url string, l load) result {
	var (
		mu     sync.Mutex
		res    result
		wg     sync.WaitGroup
		budget atomic.Int64
	)
	budget.Store(int64(l.calls))
	deadline := time.Now().Add(l.dur)
	start := time.Now()
	for w := range l.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				lat  = make([]time.Duration, 0, 1024)
				buf  bytes.Buffer
				body []byte
				errs int
				msg  string
			)
			u := url
			if len(l.spread) > 0 {
				u = l.spread[w%len(l.spread)]
			}
			wc, err := c.conn(u)
			if err != nil {
				mu.Lock()
				res.errs++
				res.errMsg = err.Error()
				mu.Unlock()
				return
			}
			defer c.release(wc)
			sid := ""
			if len(l.sessions) > 0 {
				sid = l.sessions[w%len(l.sessions)]
			}
			h := headers(sid, l.tool)
			if l.bearer != "" {
				h["Authorization"] = []string{"Bearer " + l.bearer}
			}
			for ctx.Err() == nil {
				if l.calls > 0 {
					if budget.Add(-1) < 0 {
						break
					}
				} else if time.Now().After(deadline) {
					break
				}
				var d time.Duration
				var err error
				body, d, err = c.one(wc, l, h, body, &buf)
				if err != nil {
					errs++
					if msg == "" && !errors.Is(err, context.Canceled) {
						msg = err.Error()
					}
					continue
				}
				lat = append(lat, d)
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errs += errs
			if res.errMsg == "" {
				res.errMsg = msg
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

// one makes one call of l's tool on wc (body and buf are reused buffers)
// and checks its answer.
func (c *caller) one(wc *wireConn, l load, h http.Header, body []byte, buf *bytes.Buffer) ([]byte, time.Duration, error) {
	body = callBody(body[:0], c.ids.Add(1), l.tool, l.args, l.stateless)
	t0 := time.Now()
	status, err := wc.post(body, h, buf)
	d := time.Since(t0)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d: %.200s", status, buf.Bytes())
	}
	if err == nil {
		err = checkResult(payload(buf.Bytes()), l.want)
	}
	return body, d, err
}

// runInterleaved drives several endpoints from one worker (c=1), one call
// to each in turn, for dur. Blocks of seconds per endpoint let the host's
// drift (another process waking, a frequency step) land on one row and
// not the other, which at c=1 moves a p50 by ±100 µs; calls taken in turn
// see the same host, so their difference is what the endpoints differ
// by. Each result's wall is the sum of its calls' latencies, so calls/s
// reads as 1 ÷ mean latency, as a c=1 closed loop's would.
func (c *caller) runInterleaved(ctx context.Context, urls []string, loads []load, dur time.Duration) []result {
	res := make([]result, len(urls))
	hs := make([]http.Header, len(urls))
	wcs := make([]*wireConn, len(urls))
	for i, u := range urls {
		wc, err := c.conn(u)
		if err != nil {
			res[i].errs, res[i].errMsg = 1, err.Error()
			return res
		}
		defer c.release(wc)
		wcs[i] = wc
	}
	for i, l := range loads {
		sid := ""
		if len(l.sessions) > 0 {
			sid = l.sessions[0] // as run's one worker would
		}
		hs[i] = headers(sid, l.tool)
		if l.bearer != "" {
			hs[i]["Authorization"] = []string{"Bearer " + l.bearer}
		}
		res[i].lat = make([]time.Duration, 0, 4096)
	}
	var (
		buf  bytes.Buffer
		body []byte
	)
	deadline := time.Now().Add(dur)
	more := func(n int) bool { return time.Now().Before(deadline) }
	if calls := loads[0].calls; calls > 0 {
		more = func(n int) bool { return n < calls } // each endpoint called that many times
	}
	for n := 0; ctx.Err() == nil && more(n); n++ {
		for k := range urls {
			i := (k + n) % len(urls) // each endpoint in each position in turn
			var d time.Duration
			var err error
			body, d, err = c.one(wcs[i], loads[i], hs[i], body, &buf)
			r := &res[i]
			if err != nil {
				r.errs++
				if r.errMsg == "" && !errors.Is(err, context.Canceled) {
					r.errMsg = err.Error()
				}
				continue
			}
			r.lat = append(r.lat, d)
			r.wall += d
		}
	}
	return res
}

// pct returns the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// medianHalfWidth is half the width of a distribution-free 95 % interval
// for the median of sorted: the order statistics n/2 ∓ 0.98·√n (the
// binomial's normal approximation). It is what sampling alone leaves
// uncertain in a p50 — not the host's drift between runs, which the
// alternation and the repetitions spread over the rows instead. Zero for
// too few samples to say.
func medianHalfWidth(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n < 20 {
		return 0
	}
	h := 0.98 * math.Sqrt(float64(n))
	lo := max(int(math.Floor(float64(n)/2-h)), 0)
	hi := min(int(math.Ceil(float64(n)/2+h)), n-1)
	return (sorted[hi] - sorted[lo]) / 2
}

// addedHalfWidth is the ± of a difference of two independent medians:
// their half-widths in quadrature.
func addedHalfWidth(a, b []time.Duration) time.Duration {
	ha, hb := float64(medianHalfWidth(a)), float64(medianHalfWidth(b))
	return time.Duration(math.Sqrt(ha*ha + hb*hb))
}

// toolsList pages through tools/list on a session and returns the number of
// tools and pages.
func (c *caller) toolsList(ctx context.Context, url, sid string) (tools, pages int, err error) {
	var buf bytes.Buffer
	cursor := ""
	h := headers(sid, "")
	for {
		params := `{}`
		if cursor != "" {
			q, _ := json.Marshal(cursor)
			params = `{"cursor":` + string(q) + `}`
		}
		body := []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(c.ids.Add(1), 10) + `,"method":"tools/list","params":` + params + `}`)
		resp, err := c.post(ctx, url, body, h, &buf)
		if err != nil {
			return 0, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("tools/list: status %d: %.300s", resp.StatusCode, buf.Bytes())
		}
		var m struct {
			Result *struct {
				Tools      []json.RawMessage `json:"tools"`
				NextCursor string            `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal(payload(buf.Bytes()), &m); err != nil || m.Result == nil {
			return 0, 0, fmt.Errorf("tools/list: not a list result (%v): %.300s", err, buf.Bytes())
		}
		tools += len(m.Result.Tools)
		pages++
		if m.Result.NextCursor == "" {
			return tools, pages, nil
		}
		cursor = m.Result.NextCursor
	}
}

// sortDurations sorts in place and returns d.
func sortDurations(d []time.Duration) []time.Duration {
	slices.Sort(d)
	return d
}
