package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/test/faulty"
)

// The soak's upstreams, as the generated config names them.
const (
	upDemo   = "demo"   // mcpgw demo-server: well-behaved, never reloaded
	upStdio  = "fstdio" // faulty, shared stdio child, replaced by reloads
	upState  = "fstate" // faulty, stateful: one child per session
	upHTTP   = "fhttp"  // faulty, Streamable HTTP (and 2026-07-28), in the soak's process
	up2026   = "f2026"  // faulty, shared stdio child speaking 2026-07-28 too
	upExtra  = "extra"  // faulty stdio, added and removed by reloads
	sep      = "__"
	perCallT = 45 * time.Second // a client's patience; every upstream timeout is far shorter
)

// rateLimit spaces the faults that take an upstream down, so that a
// crash loop breaker (5 failures a minute) never opens on the shared
// upstreams and the soak keeps exercising them.
type rateLimit struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (r *rateLimit) allow(key string, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.last[key]) < every {
		return false
	}
	r.last[key] = time.Now()
	return true
}

// limits for the disruptive faults, per upstream.
var faultEvery = map[string]map[faulty.Kind]time.Duration{
	upStdio: {faulty.Crash: 25 * time.Second, faulty.Grandchild: 8 * time.Second, faulty.ListChanged: 2 * time.Second},
	upExtra: {faulty.Crash: 25 * time.Second, faulty.Grandchild: 8 * time.Second, faulty.ListChanged: 2 * time.Second},
	up2026:  {faulty.Crash: 25 * time.Second, faulty.Grandchild: 8 * time.Second, faulty.ListChanged: 2 * time.Second},
	upState: {faulty.Crash: 2 * time.Second, faulty.Grandchild: 2 * time.Second, faulty.ListChanged: 2 * time.Second},
	upHTTP:  {faulty.Crash: 20 * time.Second, faulty.ListChanged: 2 * time.Second},
}

// weighted picks from choices by weight.
type weighted[T any] []struct {
	w int
	v T
}

func (ws weighted[T]) pick(rng *rand.Rand) T {
	total := 0
	for _, c := range ws {
		total += c.w
	}
	n := rng.IntN(total)
	for _, c := range ws {
		if n < c.w {
			return c.v
		}
		n -= c.w
	}
	return ws[len(ws)-1].v
}

var faultKinds = weighted[faulty.Kind]{
	{30, faulty.Echo}, {18, faulty.Slow}, {3, faulty.Hang}, {1, faulty.Crash}, {8, faulty.Garbage}, {4, faulty.Huge},
	{3, faulty.Stderr}, {3, faulty.Reset}, {4, faulty.Expire}, {10, faulty.Drop}, {2, faulty.ListChanged}, {1, faulty.Grandchild},
}

var faultyUpstreams = weighted[string]{{30, upStdio}, {30, upHTTP}, {15, upState}, {15, up2026}, {10, upExtra}}

// sessionKinds: the revision a slot's session speaks (2024-11-05 is the
// legacy HTTP+SSE transport, 2026-07-28 stateless requests).
var sessionKinds = weighted[string]{
	{25, string(mcp.Version20251125)}, {15, string(mcp.Version20250618)}, {10, string(mcp.Version20250326)}, {20, string(mcp.Version20241105)}, {30, string(mcp.Version20260728)},
}

// gen makes calls; one per worker (its random source is not shared).
type gen struct {
	rng    *rand.Rand
	worker int
	n      int
	limit  *rateLimit
	faults map[faulty.Kind]bool
	calm   func() bool // no more fhttp crashes (see pool.calmAfter)
}

func (g *gen) token(kind string) string {
	g.n++
	return fmt.Sprintf("%s-w%d-%d-%08x", kind, g.worker, g.n, g.rng.Uint32())
}

// progressToken alternates strings and numbers, which the gateway must
// give back as they were.
func (g *gen) progressToken() any {
	if g.rng.IntN(2) == 0 {
		return "pt-" + g.token("p")
	}
	return int64(1e12) + int64(g.worker)*1e9 + int64(g.n)*1000 + int64(g.rng.IntN(1000))
}

func textIs(want string) func(json.RawMessage) error {
	return func(res json.RawMessage) error {
		got, err := faulty.ResultToken(res)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%w: answer carries %q, the request sent %q", errCrossed, got, want)
		}
		return nil
	}
}

// next returns the next call for a session on route.
func (g *gen) next(route string, sk string) *call {
	stateless := sk == string(mcp.Version20260728)
	streamable := !stateless && sk != string(mcp.Version20241105)
	prefix := ""
	if route == "/mcp" {
		prefix = upDemo + sep
	}
	type maker func() *call
	demo := weighted[maker]{
		{18, func() *call { return g.demoEcho(prefix) }},
		{4, func() *call { return g.demoAdd(prefix) }},
		{3, func() *call { return g.demoGreet(prefix) }},
		{3, func() *call { return g.demoReadme(route) }},
		{6, g.list},
	}
	if !stateless {
		demo = append(demo, struct {
			w int
			v maker
		}{3, func() *call {
			return &call{label: "ping", method: mcp.MethodPing, params: map[string]any{}, wellBehaved: true}
		}})
	}
	if streamable {
		demo = append(demo, struct {
			w int
			v maker
		}{3, func() *call { return g.demoSleep(prefix, true, 0) }})
	}
	cancel := func() *call {
		if route != "/mcp" || g.rng.IntN(3) == 0 {
			return g.demoSleep(prefix, false, time.Duration(50+g.rng.IntN(900))*time.Millisecond)
		}
		return g.faultCall(faultyUpstreams.pick(g.rng), faulty.Slow, time.Duration(50+g.rng.IntN(900))*time.Millisecond)
	}
	all := append(weighted[maker]{}, demo...)
	all = append(all, struct {
		w int
		v maker
	}{5, cancel})
	if route == "/mcp" {
		all = append(all, struct {
			w int
			v maker
		}{55, func() *call { return g.faultCall(faultyUpstreams.pick(g.rng), faultKinds.pick(g.rng), 0) }})
	}
	return all.pick(g.rng)()
}

func (g *gen) demoEcho(prefix string) *call {
	tok := g.token("echo")
	return &call{label: "demo.echo", method: mcp.MethodToolsCall, name: prefix + "echo", wellBehaved: true,
		params: map[string]any{"name": prefix + "echo", "arguments": map[string]string{"text": tok}}, check: textIs(tok)}
}

func (g *gen) demoAdd(prefix string) *call {
	a, b := g.rng.IntN(1e6), g.rng.IntN(1e6)
	return &call{label: "demo.add", method: mcp.MethodToolsCall, name: prefix + "add", wellBehaved: true,
		params: map[string]any{"name": prefix + "add", "arguments": map[string]int{"a": a, "b": b}},
		check: func(res json.RawMessage) error {
			var r struct {
				Structured struct {
					Sum float64 `json:"sum"`
				} `json:"structuredContent"`
			}
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if int(r.Structured.Sum) != a+b {
				return fmt.Errorf("%w: %d+%d answered %v", errCrossed, a, b, r.Structured.Sum)
			}
			return nil
		}}
}

func (g *gen) demoGreet(prefix string) *call {
	tok := g.token("greet")
	return &call{label: "demo.greet", method: mcp.MethodPromptsGet, name: prefix + "greet", wellBehaved: true,
		params: map[string]any{"name": prefix + "greet", "arguments": map[string]string{"name": tok}},
		check: func(res json.RawMessage) error {
			var r struct {
				Messages []struct {
					Content struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(res, &r); err != nil || len(r.Messages) == 0 {
				return fmt.Errorf("prompt result %.200s: %v", res, err)
			}
			if want := "Say hello to " + tok + "."; r.Messages[0].Content.Text != want {
				return fmt.Errorf("%w: prompt says %q, want %q", errCrossed, r.Messages[0].Content.Text, want)
			}
			return nil
		}}
}

func (g *gen) demoReadme(route string) *call {
	uri := "demo://readme"
	if route == "/mcp" {
		uri = upDemo + "+" + uri
	}
	return &call{label: "demo.readme", method: mcp.MethodResourcesRead, name: uri, wellBehaved: true,
		params: map[string]any{"uri": uri},
		check: func(res json.RawMessage) error {
			var r struct {
				Contents []struct {
					URI string `json:"uri"`
				} `json:"contents"`
			}
			if err := json.Unmarshal(res, &r); err != nil || len(r.Contents) == 0 {
				return fmt.Errorf("read result %.200s: %v", res, err)
			}
			if r.Contents[0].URI != uri {
				return fmt.Errorf("%w: read of %s answered for %s", errCrossed, uri, r.Contents[0].URI)
			}
			return nil
		}}
}

// demoSleep is a well-behaved call that reports progress: disconnect cuts
// its stream and resumes it; cancelAfter cancels it.
func (g *gen) demoSleep(prefix string, disconnect bool, cancelAfter time.Duration) *call {
	ms := 400 + g.rng.IntN(600)
	label := "demo.sleep-resume"
	if cancelAfter > 0 {
		ms, label = 2000+g.rng.IntN(1000), "demo.sleep-cancel"
	}
	want := fmt.Sprintf("slept %s", time.Duration(ms)*time.Millisecond)
	return &call{label: label, method: mcp.MethodToolsCall, name: prefix + "sleep", wellBehaved: true,
		params:   map[string]any{"name": prefix + "sleep", "arguments": map[string]int{"ms": ms}},
		progress: g.progressToken(), disconnect: disconnect, cancelAfter: cancelAfter,
		check: func(res json.RawMessage) error {
			got, err := faulty.ResultToken(res)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%w: sleep answered %q, want %q", errCrossed, got, want)
			}
			return nil
		}}
}

func (g *gen) list() *call {
	m := []string{mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesList}[g.rng.IntN(3)]
	key := strings.TrimSuffix(m, "/list")
	return &call{label: "list", method: m, params: map[string]any{}, wellBehaved: true,
		check: func(res json.RawMessage) error {
			var r map[string]json.RawMessage
			if err := json.Unmarshal(res, &r); err != nil {
				return err
			}
			if _, ok := r[key]; !ok {
				return fmt.Errorf("%s result lacks %q: %.200s", m, key, res)
			}
			return nil
		}}
}

// faultCall scripts one fault on a faulty upstream; cancelAfter > 0 makes
// it a long slow call that is cancelled.
func (g *gen) faultCall(up string, kind faulty.Kind, cancelAfter time.Duration) *call {
	if up != upHTTP && (kind == faulty.Reset || kind == faulty.Expire) {
		kind = faulty.Drop // on stdio these are crashes, which are rationed below
	}
	if up == upHTTP && kind == faulty.Grandchild {
		kind = faulty.Echo
	}
	if every, ok := faultEvery[up][kind]; ok && !g.limit.allow(up+"/"+string(kind), every) || !g.faults[kind] {
		kind = faulty.Echo
	}
	if up == upHTTP && (kind == faulty.Crash || kind == faulty.Expire) && g.calm() {
		kind = faulty.Echo
	}
	f := faulty.Fault{Kind: kind, Token: g.token(string(kind))}
	c := &call{label: up + "." + string(kind), method: mcp.MethodToolsCall, name: up + sep + string(kind)}
	switch kind {
	case faulty.Slow:
		f.Delay, f.Events = time.Duration(50+g.rng.IntN(1450))*time.Millisecond, g.rng.IntN(6)
		c.progress = g.progressToken()
		if cancelAfter > 0 {
			f.Delay, f.Events = 2500*time.Millisecond, 10
			c.cancelAfter, c.label = cancelAfter, up+".slow-cancel"
		}
	case faulty.Crash:
		f.Delay = time.Duration(g.rng.IntN(200)) * time.Millisecond
	case faulty.Garbage:
		f.Bytes = 10 + g.rng.IntN(4096)
	case faulty.Huge:
		f.Bytes = 64<<10 + g.rng.IntN(1536<<10) // beyond the 1 MiB max_line_bytes on stdio, sometimes
	case faulty.Stderr:
		f.Bytes = 1<<10 + g.rng.IntN(64<<10)
	case faulty.Reset:
		f.Delay = time.Duration(g.rng.IntN(100)) * time.Millisecond
	case faulty.Drop:
		f.Events, f.Delay, f.NoResume = g.rng.IntN(5), time.Duration(g.rng.IntN(300))*time.Millisecond, g.rng.IntN(4) == 0
		c.progress = g.progressToken()
	}
	args := json.RawMessage(f.Arguments())
	c.params = map[string]any{"name": c.name, "arguments": args}
	tok := f.Token
	c.check = func(res json.RawMessage) error {
		got, err := faulty.ResultToken(res)
		if errors.Is(err, faulty.ErrNoToken) {
			return fmt.Errorf("%s answered without a token: %.200s", c.label, res)
		}
		if err != nil {
			return err
		}
		if got != tok {
			return fmt.Errorf("%w: answer carries %q, the request sent %q", errCrossed, got, tok)
		}
		return nil
	}
	return c
}

// slot is one place in the session pool; workers share its session and
// the one that finds it spent (or lost) replaces it.
type slot struct {
	mu     sync.RWMutex
	sess   session
	kind   string
	route  string
	budget int64
	used   atomic.Int64
}

type pool struct {
	cl     *client
	st     *stats
	slots  []*slot
	seed   uint64
	limit  *rateLimit
	faults map[faulty.Kind]bool // the kinds to inject
	// calmAfter: from then on nothing restarts fhttp or ends its session
	// (no crash or expire fault, no replacing reload), since that ends
	// every call the upstream serves and so would hide streams the gateway
	// leaks there.
	calmAfter atomic.Pointer[time.Time]
}

func (p *pool) calm() bool {
	t := p.calmAfter.Load()
	return t != nil && time.Now().After(*t)
}

// open (re)fills s with a new session of a random kind. Callers hold s.mu.
func (p *pool) open(s *slot, rng *rand.Rand) {
	if s.sess != nil {
		s.sess.close()
		s.sess = nil
	}
	s.kind = sessionKinds.pick(rng)
	s.route = "/mcp"
	if rng.IntN(5) == 0 {
		s.route = "/demo"
	}
	s.budget = int64(20 + rng.IntN(280))
	s.used.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	switch s.kind {
	case string(mcp.Version20260728):
		s.sess = &stateless{cl: p.cl, route: s.route}
	case string(mcp.Version20241105):
		var l *legacy
		if l, err = p.cl.openLegacy(ctx, s.route); err == nil {
			s.sess = l
		}
	default:
		var st *streamable
		if st, err = p.cl.openStreamable(ctx, s.route, s.kind); err == nil {
			s.sess = st
		}
	}
	if err != nil {
		p.st.opened(false, s.kind, err.Error())
		return
	}
	p.st.opened(true, s.kind, "")
}

// closeAll ends every session (DELETE, or closing the legacy stream).
func (p *pool) closeAll() {
	var wg sync.WaitGroup
	for _, s := range p.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.sess != nil {
				s.sess.close()
				s.sess = nil
			}
		}()
	}
	wg.Wait()
}

// work sends requests until stop is closed, then finishes the one in hand.
func (p *pool) work(worker int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(p.seed, uint64(worker)+1))
	g := &gen{rng: rng, worker: worker, limit: p.limit, faults: p.faults, calm: p.calm}
	for {
		select {
		case <-stop:
			return
		default:
		}
		s := p.slots[rng.IntN(len(p.slots))]
		s.mu.RLock()
		sess := s.sess
		if sess == nil || sess.lost() || s.used.Add(1) > s.budget {
			s.mu.RUnlock()
			s.mu.Lock()
			if s.sess == sess { // nobody replaced it meanwhile
				if sess != nil && sess.lost() {
					p.st.sessionLost(sess.revision())
				}
				p.open(s, rng)
				if s.sess == nil {
					time.Sleep(200 * time.Millisecond)
				}
			}
			s.mu.Unlock()
			continue
		}
		c := g.next(s.route, s.kind)
		ctx, cancel := context.WithTimeout(context.Background(), perCallT)
		rep := sess.do(ctx, c)
		cancel()
		s.mu.RUnlock()
		p.st.record(sess.revision(), c, rep)
	}
}
