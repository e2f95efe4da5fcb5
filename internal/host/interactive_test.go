package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// askingTransport is an in-memory legacy upstream that answers
// initialize and ping, and records what the client answers to requests
// the test makes it send (ask).
type askingTransport struct {
	deliver client.DeliverFunc
	done    chan struct{}
	once    sync.Once
	answers chan *jsonrpc.Message
	held    chan *jsonrpc.Message // calls of the tool "hold": not answered until release
	slow    chan struct{}         // non-nil: initialize is answered once it is closed
}

func (t *askingTransport) Start(_ context.Context, deliver client.DeliverFunc) error {
	t.deliver = deliver
	return nil
}

func (t *askingTransport) Send(_ context.Context, b []byte) error {
	m, err := jsonrpc.Parse(b)
	if err != nil {
		return err
	}
	select {
	case <-t.done:
		return client.ErrClosed
	default:
	}
	switch m.Kind() {
	case jsonrpc.KindResponse:
		t.answers <- m
	case jsonrpc.KindRequest:
		if name, _ := rawjson.GetString(m.Params, "name"); name == "hold" {
			t.held <- m
			return nil
		}
		res := json.RawMessage(`{}`)
		slow := (<-chan struct{})(nil)
		if m.Method == mcp.MethodInitialize {
			res = json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"asking","version":"1"}}`)
			slow = t.slow
		}
		out, _ := jsonrpc.Encode(jsonrpc.NewResult(m.ID, res))
		go func() {
			if slow != nil {
				<-slow
			}
			t.deliver(out, nil)
		}()
	}
	return nil
}

// ask sends a server→client request, as a stdio upstream would: nothing
// says which call it belongs to.
func (t *askingTransport) ask(method string) {
	t.deliver([]byte(`{"jsonrpc":"2.0","id":"s1","method":"`+method+`","params":{}}`), nil)
}

// release answers a held call.
func (t *askingTransport) release(m *jsonrpc.Message) {
	out, _ := jsonrpc.Encode(jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)))
	t.deliver(out, nil)
}

func (t *askingTransport) Done() <-chan struct{} { return t.done }
func (t *askingTransport) Err() error            { return nil }
func (t *askingTransport) Close() error {
	t.once.Do(func() { close(t.done) })
	return nil
}

func (t *askingTransport) closed() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// askingHost starts a host with one upstream "u" over askingTransports,
// returning every transport it made, in order (the first is the shared
// connection's).
func askingHost(t testing.TB, reg *prometheus.Registry, log *zap.Logger, mod func(*config.Upstream)) (*host.Host, func() []*askingTransport) {
	t.Helper()
	return askingHostSlow(t, reg, log, mod, nil)
}

// askingHostSlow is askingHost whose connections after the first (the
// shared one) start only once slow is closed (nil: at once).
func askingHostSlow(t testing.TB, reg *prometheus.Registry, log *zap.Logger, mod func(*config.Upstream), slow chan struct{}) (*host.Host, func() []*askingTransport) {
	t.Helper()
	ucfg := &config.Upstream{Protocol: "legacy", Timeout: config.Duration(10 * time.Second), InteractivePool: 2}
	if mod != nil {
		mod(ucfg)
	}
	var mu sync.Mutex
	var made []*askingTransport
	h := host.New(&config.Config{Separator: "__", Upstreams: map[string]*config.Upstream{"u": ucfg}}, host.Options{
		Logger:  log,
		Metrics: metrics.New(reg, metrics.Options{NoRuntimeCollectors: true}),
		Transport: func(string) (client.Transport, error) {
			tr := &askingTransport{done: make(chan struct{}), answers: make(chan *jsonrpc.Message, 4), held: make(chan *jsonrpc.Message, 4)}
			mu.Lock()
			if len(made) > 0 {
				tr.slow = slow
			}
			made = append(made, tr)
			mu.Unlock()
			return tr, nil
		},
	})
	h.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return h, func() []*askingTransport {
		mu.Lock()
		defer mu.Unlock()
		return append([]*askingTransport(nil), made...)
	}
}

// Issue 30 item 1: a sampling request that no single call can be named
// for was refused without a log line or a count, and its error told the
// user to set stateful: true (even when set). It is now logged, counted
// by upstream and method.
func TestUnattributedRequestLoggedAndCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	core, logs := observer.New(zapcore.WarnLevel)
	h, made := askingHost(t, reg, zap.New(core), nil)
	defer h.Close()
	tr := made()[0]
	tr.ask(mcp.MethodSamplingCreateMessage)
	ans := testwait.Recv(t, tr.answers, "the refusal of the unattributed request")
	if ans.Error == nil || !strings.Contains(ans.Error.Message, "interactive_pool") || strings.Contains(ans.Error.Message, "stateful: true") {
		t.Errorf("refusal = %+v, want one naming interactive_pool, not stateful: true", ans.Error)
	}
	if got := value(t, reg, "mcpgw_upstream_requests_unattributed_total", "upstream", "u", "method", mcp.MethodSamplingCreateMessage); got != 1 {
		t.Errorf("unattributed counter = %v, want 1", got)
	}
	if n := logs.FilterMessageSnippet("refused a server→client request").Len(); n != 1 {
		t.Errorf("%d refusal log lines, want 1", n)
	}
	// A flood is counted in full and logged about once a second.
	start := time.Now()
	for range 3 {
		tr.ask(mcp.MethodElicitationCreate)
		testwait.Recv(t, tr.answers, "a refusal")
	}
	if got := value(t, reg, "mcpgw_upstream_requests_unattributed_total", "upstream", "u", "method", mcp.MethodElicitationCreate); got != 3 {
		t.Errorf("unattributed elicitations = %v, want 3", got)
	}
	if n := logs.FilterMessageSnippet("refused a server→client request").Len(); time.Since(start) < time.Second && n != 1 {
		t.Errorf("%d refusal log lines for 4 refusals within a second, want 1", n)
	}
}

// asker is the context of a call from a client that declared sampling:
// one the upstream may ask.
func asker(ctx context.Context) context.Context {
	return host.WithCallerCapabilities(ctx, json.RawMessage(`{"sampling":{},"roots":{}}`))
}

// Issue 30 item 1: the pool served overlapping interactive calls only
// once the upstream had asked; before that every sampling of overlapping
// calls was refused. Now from the first call: a call that may be asked
// takes the shared connection when nothing is in flight there and a
// connection of the pool otherwise, at most interactive_pool of them,
// reused; calls of callers that cannot be asked (nothing declared, or
// roots only without forward_roots), tasks and lists stay on the shared
// one; past the queue's bound a call is refused with -32004 naming the
// key (and counted); the host's Close closes them all.
func TestInteractivePoolBoundedAndOwned(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, made := askingHost(t, reg, zap.NewNop(), nil)
	closed := false
	defer func() {
		if !closed {
			h.Close()
		}
	}()
	u := h.Upstream("u")
	base, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx := asker(base)
	shared, err := u.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	params := json.RawMessage(`{"name":"t","arguments":{}}`)
	c0, rel0, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
	if err != nil || c0 != shared {
		t.Fatalf("first call: shared %v, %v (want the shared connection, nothing being in flight there)", c0 == shared, err)
	}
	// The shared connection has an asking call now: these stay there all
	// the same, as they cannot be asked or must stay.
	for what, ctx := range map[string]context.Context{
		"a caller without capabilities":     base,
		"a caller that declared nothing":    host.WithCallerCapabilities(base, json.RawMessage(`{}`)),
		"a caller that declared roots only": host.WithCallerCapabilities(base, json.RawMessage(`{"roots":{"listChanged":true}}`)),
		"a caller with a null sampling":     host.WithCallerCapabilities(base, json.RawMessage(`{"sampling":null}`)),
	} {
		if c, _, _ := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true); c != shared {
			t.Errorf("%s left the shared connection", what)
		}
	}
	if c, _, _ := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, false); c != shared {
		t.Error("a call whose requests are not relayed left the shared connection")
	}
	if c, _, _ := u.Interactive(ctx, shared, mcp.MethodToolsCall, json.RawMessage(`{"name":"t","task":{}}`), true); c != shared {
		t.Error("a task-augmented call left the shared connection (its task would be lost)")
	}
	if c, _, _ := u.Interactive(ctx, shared, mcp.MethodToolsList, nil, true); c != shared {
		t.Error("a list left the shared connection")
	}

	c1, rel1, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
	if err != nil {
		t.Fatal(err)
	}
	c2, rel2, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
	if err != nil {
		t.Fatal(err)
	}
	if c1 == shared || c2 == shared || c1 == c2 {
		t.Fatal("overlapping interactive calls did not get connections of their own")
	}
	if n := len(made()); n != 3 {
		t.Fatalf("%d connections, want 3 (shared + pool of 2)", n)
	}
	if got := value(t, reg, "mcpgw_upstream_interactive_connections", "upstream", "u", "state", "busy"); got != 2 {
		t.Errorf("busy gauge = %v, want 2", got)
	}

	// All busy: calls queue, up to 128 per connection (3).
	wctx, wcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 384 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, rel, err := u.Interactive(wctx, shared, mcp.MethodToolsCall, params, true); err == nil {
				rel()
			}
		}()
	}
	testwait.Until(t, "384 calls waiting", func() bool { return host.InteractiveWaiting(u) == 384 })
	_, _, err = u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
	var lr *limits.Refusal
	if !errors.As(err, &lr) || lr.Bound != "upstreams.u.interactive_pool" || lr.JSONRPC().Code != mcp.CodeRateLimited {
		t.Fatalf("call past the queue: %v, want a refusal naming upstreams.u.interactive_pool", err)
	}
	if v := value(t, reg, "mcpgw_limit_refusals_total", "bound", "upstreams.u.interactive_pool"); v != 1 {
		t.Errorf("limit_refusals_total = %v, want 1", v)
	}
	wcancel()
	wg.Wait()
	// The shared connection given back is taken again by the next call.
	rel0()
	if c, rel, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true); err != nil || c != shared {
		t.Errorf("after the shared connection's call ended: shared %v, %v", c == shared, err)
	} else {
		rel()
	}
	rel1()
	rel2()
	if n := len(made()); n != 3 {
		t.Errorf("%d connections after the queue drained, want 3 (reused)", n)
	}

	h.Close()
	closed = true
	for i, tr := range made() {
		if !tr.closed() {
			t.Errorf("connection %d still open after Close", i)
		}
	}
}

// A call that may be asked does not join a call already in flight on the
// shared connection, even one that cannot be asked: a request arriving
// then would have two candidates and be refused. It takes a pool
// connection; when the pool is full, it takes the shared one all the same
// rather than wait (its requests are then refused if they overlap, not
// guessed).
func TestInteractiveCallAvoidsBusySharedConnection(t *testing.T) {
	h, made := askingHost(t, prometheus.NewRegistry(), zap.NewNop(), func(u *config.Upstream) { u.InteractivePool = 1 })
	defer h.Close()
	u := h.Upstream("u")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shared, err := u.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A call of a client that cannot be asked, in flight on the shared
	// connection until the test releases it.
	plain := make(chan error, 1)
	go func() {
		_, err := shared.Call(ctx, mcp.MethodToolsCall, json.RawMessage(`{"name":"hold"}`), client.CallOptions{})
		plain <- err
	}()
	held := testwait.Recv(t, made()[0].held, "the plain call to reach the upstream")
	params := json.RawMessage(`{"name":"t"}`)
	c1, rel1, err := u.Interactive(asker(ctx), shared, mcp.MethodToolsCall, params, true)
	if err != nil {
		t.Fatal(err)
	}
	if c1 == shared {
		t.Fatal("an interactive call joined a call in flight on the shared connection")
	}
	// The pool (1) is busy: the next one takes the shared connection.
	c2, rel2, err := u.Interactive(asker(ctx), shared, mcp.MethodToolsCall, params, true)
	if err != nil || c2 != shared {
		t.Fatalf("with the pool busy: shared %v, %v (want the shared connection)", c2 == shared, err)
	}
	rel1()
	rel2()
	made()[0].release(held)
	if err := testwait.Recv(t, plain, "the plain call's answer"); err != nil {
		t.Fatal(err)
	}
}

// On a connection that cannot be multiplied (a stateful session's own),
// interactive calls take turns: the second waits until the first is done.
func TestInteractiveTurnsOnSessionConnection(t *testing.T) {
	h, _ := askingHost(t, prometheus.NewRegistry(), zap.NewNop(), func(u *config.Upstream) {
		u.Stateful, u.MaxSessions, u.MaxSessionsPerPrincipal = true, 4, 4
	})
	defer h.Close()
	u := h.Upstream("u")
	ctx, cancel := context.WithTimeout(asker(host.WithSession(context.Background(), "s1")), 10*time.Second)
	defer cancel()
	own, err := u.ClientFor(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	params := json.RawMessage(`{"name":"t"}`)
	c, rel, err := u.Interactive(ctx, own, mcp.MethodToolsCall, params, true)
	if err != nil || c != own {
		t.Fatalf("first call: same connection %v, %v", c == own, err)
	}
	second := make(chan *client.Client)
	go func() {
		c, rel2, err := u.Interactive(ctx, own, mcp.MethodToolsCall, params, true)
		if err == nil {
			defer rel2()
		}
		second <- c
	}()
	testwait.Until(t, "the second call waiting for its turn", func() bool { return host.InteractiveTurnWaiting(u, own) == 1 })
	select {
	case <-second:
		t.Fatal("second interactive call ran while the first was in flight")
	default:
	}
	rel()
	if c := testwait.Recv(t, second, "the second call's turn"); c != own {
		t.Error("the second call moved off the session's connection")
	}
}

// A pool connection unused for 2 minutes is closed, so that a burst of
// interactive calls does not leave its children running; a newer one
// stays.
func TestInteractivePoolReapsIdle(t *testing.T) {
	h, made := askingHost(t, prometheus.NewRegistry(), zap.NewNop(), nil)
	defer h.Close()
	u := h.Upstream("u")
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	host.SetInteractiveClock(u, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ctx, cancel := context.WithTimeout(asker(context.Background()), 10*time.Second)
	defer cancel()
	shared, err := u.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	params := json.RawMessage(`{"name":"t"}`)
	var rel [3]func()
	for i := range rel {
		c, r, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
		if err != nil {
			t.Fatal(err)
		}
		if (c == shared) != (i == 0) {
			t.Fatalf("call %d on the shared connection: %v", i, c == shared)
		}
		rel[i] = r
	}
	rel[0]()
	rel[1]()
	advance(time.Minute)
	rel[2]()
	advance(time.Minute + time.Second)
	host.ReapInteractive(u)
	trs := made()
	testwait.Until(t, "the idle connection closed", trs[1].closed)
	if trs[2].closed() {
		t.Error("a connection idle for a minute was closed")
	}
	if trs[0].closed() {
		t.Error("the shared connection was closed")
	}
}

// roots/list is a request the upstream sends too, but without
// forward_roots the gateway answers it from config whoever the call is:
// a caller that declared only roots is placed only with forward_roots.
func TestInteractiveRootsOnlyWithForwardRoots(t *testing.T) {
	for _, forward := range []bool{false, true} {
		h, _ := askingHost(t, prometheus.NewRegistry(), zap.NewNop(), func(u *config.Upstream) { u.ForwardRoots = forward })
		u := h.Upstream("u")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		shared, err := u.Client(ctx)
		if err != nil {
			t.Fatal(err)
		}
		params := json.RawMessage(`{"name":"t"}`)
		_, rel0, err := u.Interactive(asker(ctx), shared, mcp.MethodToolsCall, params, true) // holds the shared connection
		if err != nil {
			t.Fatal(err)
		}
		rootsOnly := host.WithCallerCapabilities(ctx, json.RawMessage(`{"roots":{"listChanged":true}}`))
		c, rel, err := u.Interactive(rootsOnly, shared, mcp.MethodToolsCall, params, true)
		if err != nil {
			t.Fatal(err)
		}
		if moved := c != shared; moved != forward {
			t.Errorf("forward_roots %v: a roots-only caller's call moved off the shared connection: %v", forward, moved)
		}
		rel()
		rel0()
		cancel()
		h.Close()
	}
}

// A pool connection takes time to start (a child: seconds, for some
// servers). A call waiting for one takes the shared connection as soon as
// the asking call there ends, rather than wait for the start; the
// connection, once started, serves the next call.
func TestInteractiveWaiterTakesFreedSharedConnection(t *testing.T) {
	slow := make(chan struct{})
	h, made := askingHostSlow(t, prometheus.NewRegistry(), zap.NewNop(), nil, slow)
	defer h.Close()
	defer close(slow)
	u := h.Upstream("u")
	ctx, cancel := context.WithTimeout(asker(context.Background()), 10*time.Second)
	defer cancel()
	shared, err := u.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	params := json.RawMessage(`{"name":"t"}`)
	_, rel0, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
	if err != nil {
		t.Fatal(err)
	}
	type placed struct {
		c   *client.Client
		rel func()
		err error
	}
	second := make(chan placed, 1)
	go func() {
		c, rel, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
		second <- placed{c, rel, err}
	}()
	testwait.Until(t, "the second call waiting, a pool connection starting", func() bool {
		return host.InteractiveWaiting(u) == 1 && len(made()) == 2
	})
	rel0()
	got := testwait.Recv(t, second, "the second call placed while the pool connection starts")
	if got.err != nil || got.c != shared {
		t.Fatalf("second call: shared %v, %v (want the shared connection, freed first)", got.c == shared, got.err)
	}
	got.rel()
}

// A pool connection that cannot be started fails the call waiting for it
// with the cause, rather than leave it waiting for its context.
func TestInteractivePoolDialFailureAnswersTheWaiter(t *testing.T) {
	var mu sync.Mutex
	n := 0
	h := host.New(&config.Config{Separator: "__", Upstreams: map[string]*config.Upstream{"u": {Protocol: "legacy", Timeout: config.Duration(10 * time.Second), InteractivePool: 2}}}, host.Options{
		Logger:  zap.NewNop(),
		Metrics: metrics.New(prometheus.NewRegistry(), metrics.Options{NoRuntimeCollectors: true}),
		Transport: func(string) (client.Transport, error) {
			mu.Lock()
			defer mu.Unlock()
			if n++; n > 1 {
				return nil, errors.New("no second child today")
			}
			return &askingTransport{done: make(chan struct{}), answers: make(chan *jsonrpc.Message, 4), held: make(chan *jsonrpc.Message, 4)}, nil
		},
	})
	h.Start()
	defer h.Close()
	ctx, cancel := context.WithTimeout(asker(context.Background()), testwait.Long)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	u := h.Upstream("u")
	shared, err := u.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	params := json.RawMessage(`{"name":"t"}`)
	_, rel0, err := u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rel0()
	_, _, err = u.Interactive(ctx, shared, mcp.MethodToolsCall, params, true)
	var ue *host.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no second child today") {
		t.Fatalf("call waiting for a pool connection that failed to start: %v, want the upstream unavailable with the cause", err)
	}
}
