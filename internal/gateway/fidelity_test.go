package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// Fidelity tests: each mechanism by which an upstream talks back during or
// outside a call (sampling, elicitation, roots, logging, resource updates,
// list changes, cancellation) works through the gateway for two or more
// concurrent downstream sessions, and nothing of one session reaches
// another. HTTP upstreams tie a server→client message to its call by the
// response stream that carries it; stdio upstreams cannot, so the gateway
// relays to the single interactive call in flight and refuses otherwise.

const fidVersion = "2025-11-25"

// fidConnect opens an official-SDK client session (2025-11-25) to url,
// offering roots when given.
func fidConnect(t *testing.T, url string, opts *mcp.ClientOptions, roots ...*mcp.Root) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "fidelity-client", Version: "1"}, opts)
	if len(roots) > 0 {
		c.AddRoots(roots...)
	}
	// A transport of its own, whose idle connections are closed once the
	// session is: a pooled connection that never carried a request holds
	// the gateway's http.Server.Shutdown for 5s.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: tr}},
		&mcp.ClientSessionOptions{ProtocolVersion: fidVersion})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != fidVersion {
		t.Fatalf("negotiated %q, want %q", got, fidVersion)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// fidCall calls a tool and returns its text and whether it is an error result.
func fidCall(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, bool, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, ""), res.IsError, nil
}

// fidExpect calls a tool and checks its text.
func fidExpect(ctx context.Context, t *testing.T, who string, cs *mcp.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	got, isErr, err := fidCall(ctx, cs, name, args)
	switch {
	case err != nil:
		t.Errorf("%s: %s: %v", who, name, err)
	case isErr || got != want:
		t.Errorf("%s: %s = %q (isError %v), want %q", who, name, got, isErr, want)
	}
}

// fidInbox collects what a client's handlers saw.
type fidInbox struct {
	mu    sync.Mutex
	items []string
}

func (b *fidInbox) add(s string) {
	b.mu.Lock()
	b.items = append(b.items, s)
	b.mu.Unlock()
}

func (b *fidInbox) get() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.items)
}

// fidSorted is the inbox sorted: the SDK client runs notification handlers
// asynchronously, so their order is not the wire order.
func (b *fidInbox) sorted() []string {
	s := b.get()
	slices.Sort(s)
	return s
}

// fidGather waits (bounded) until every inbox holds what is wanted, then a
// little longer so that anything extra or foreign would show up too, and
// returns what each inbox holds, sorted.
func fidGather(inboxes map[string]*fidInbox, want map[string][]string) map[string][]string {
	sortedWant := map[string][]string{}
	for k := range inboxes {
		w := slices.Clone(want[k])
		slices.Sort(w)
		sortedWant[k] = w
	}
	deadline := time.Now().Add(testwait.Long) // returns as soon as all is there
	for time.Now().Before(deadline) {
		ok := true
		for k, ib := range inboxes {
			if !slices.Equal(ib.sorted(), sortedWant[k]) {
				ok = false
			}
		}
		if ok {
			break
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	// A negative check (nothing more arrives): a wait cut short by load
	// only misses a failure, never makes one.
	time.Sleep(150 * time.Millisecond)
	got := map[string][]string{}
	for k, ib := range inboxes {
		got[k] = ib.sorted()
	}
	return got
}

// fidSettle is fidGather followed by fidCompare.
func fidSettle(t *testing.T, inboxes map[string]*fidInbox, want map[string][]string) {
	t.Helper()
	fidCompare(t, fidGather(inboxes, want), want)
}

// fidCompare checks what each session received (got is sorted).
func fidCompare(t *testing.T, got, want map[string][]string) {
	t.Helper()
	for k := range got {
		w := slices.Clone(want[k])
		slices.Sort(w)
		if !slices.Equal(got[k], w) {
			t.Errorf("session %s received %q, want %q", k, got[k], w)
		}
	}
}

// fidWaitEvent waits (bounded) until the upstream recorded ev; in process
// it wakes on the log's channel, for a stdio child it polls the log file.
func fidWaitEvent(up *fidUpstream, ev string, d time.Duration) bool {
	var wake <-chan string
	if m, ok := up.log.(*fidMemLog); ok {
		wake = m.events
	}
	deadline := time.After(d) // the caller's bound on the event
	for {
		if slices.Contains(up.log.all(), ev) {
			return true
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Millisecond): // a poll of the log file, bounded by deadline
		case <-deadline:
			return false
		}
	}
}

func fidCount(evs []string, ev string) int {
	n := 0
	for _, e := range evs {
		if e == ev {
			n++
		}
	}
	return n
}

// fidEachKind runs body against an HTTP and a stdio fidelity upstream, the
// two at once: each has a gateway and an upstream of its own.
func fidEachKind(t *testing.T, body func(t *testing.T, stdio bool)) {
	fidKinds(t, true, body)
}

// fidEachKindInTurn is fidEachKind one kind after the other, for a test
// whose timing must not share the machine.
func fidEachKindInTurn(t *testing.T, body func(t *testing.T, stdio bool)) {
	fidKinds(t, false, body)
}

func fidKinds(t *testing.T, parallel bool, body func(t *testing.T, stdio bool)) {
	for _, stdio := range []bool{false, true} {
		name := "http"
		if stdio {
			name = "stdio"
		}
		t.Run(name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			body(t, stdio)
		})
	}
}

// fidUp builds a fidelity upstream of the kind asked for; barrier applies
// to the in-process (HTTP) one only.
func fidUp(t *testing.T, stdio bool, name string, barrier int, extra ...string) *fidUpstream {
	t.Helper()
	if stdio {
		return fidStdioUpstream(t, name, extra...)
	}
	return fidHTTPUpstream(t, name, barrier, extra...)
}

// fidRun runs the sessions' calls: concurrently on an HTTP upstream, one
// after the other on a stdio upstream (where the gateway can only relay to
// the single interactive call in flight).
func fidRun(stdio bool, calls ...func()) {
	if stdio {
		for _, c := range calls {
			c()
		}
		return
	}
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c()
		}()
	}
	wg.Wait()
}

func fidSampler(name string, inbox *fidInbox) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			var q string
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					q = tc.Text
				}
			}
			inbox.add(q)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "model-" + name, Content: &mcp.TextContent{Text: "answer-from-" + name}}, nil
		},
	}
}

func TestFidelitySamplingReachesItsCaller(t *testing.T) {
	t.Parallel()
	fidEachKind(t, func(t *testing.T, stdio bool) {
		up := fidUp(t, stdio, "up", 2)
		base := fidGateway(t, "", up)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		inA, inB := &fidInbox{}, &fidInbox{}
		a := fidConnect(t, base+"/mcp", fidSampler("A", inA))
		b := fidConnect(t, base+"/mcp", fidSampler("B", inB))
		// On HTTP both tools meet at a barrier before sampling, so both
		// sampling requests are in flight at once.
		fidRun(stdio,
			func() {
				fidExpect(ctx, t, "A", a, "up__sample", map[string]any{"tag": "A", "barrier": !stdio}, "tag=A answer=answer-from-A")
			},
			func() {
				fidExpect(ctx, t, "B", b, "up__sample", map[string]any{"tag": "B", "barrier": !stdio}, "tag=B answer=answer-from-B")
			})
		if got := inA.get(); !slices.Equal(got, []string{"question from A"}) {
			t.Errorf("A's sampling handler saw %q, want only its own question", got)
		}
		if got := inB.get(); !slices.Equal(got, []string{"question from B"}) {
			t.Errorf("B's sampling handler saw %q, want only its own question", got)
		}
	})
}

// Two calls in flight on a shared stdio upstream: the gateway cannot tell
// from the wire whose sampling request it is. A call from a client that
// declared sampling runs where it is alone from the first call (issue 30),
// so two samplers overlapping are each served, neither seeing the other's
// question. A client that declared nothing cannot be asked and stays on the
// shared child beside whatever runs there; a sampling request during its
// call, beside a sampler's, is refused, never relayed to the sampler.
func TestFidelityStdioOverlappingSampling(t *testing.T) {
	t.Parallel()
	up := fidStdioUpstream(t, "pipe")
	base := fidGateway(t, "", up)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inA, inB := &fidInbox{}, &fidInbox{}
	a := fidConnect(t, base+"/mcp", fidSampler("A", inA))
	b := fidConnect(t, base+"/mcp", fidSampler("B", inB))
	n := fidConnect(t, base+"/mcp", nil) // declares no sampling capability

	// B's call is in flight (on the shared child) until B cancels it.
	ctxB, cancelB := context.WithCancel(ctx)
	defer cancelB()
	held := make(chan error, 1)
	go func() {
		_, _, err := fidCall(ctxB, b, "pipe__block", map[string]any{"tag": "hold", "hold": true})
		held <- err
	}()
	if !fidWaitEvent(up, "start hold", testwait.Long) {
		t.Fatal("B's call never reached the upstream")
	}
	// The first overlap, on a fresh gateway: served, on a child of its own.
	fidExpect(ctx, t, "A", a, "pipe__sample", map[string]any{"tag": "A"}, "tag=A answer=answer-from-A")
	// A client that cannot be asked, beside B's call: its upstream's
	// request has two candidates and is refused; B never sees it.
	got, isErr, err := fidCall(ctx, n, "pipe__sample", map[string]any{"tag": "N"})
	if err != nil {
		t.Fatalf("N: %v", err)
	}
	if !isErr || !strings.Contains(got, "interactive_pool") || strings.Contains(got, "stateful: true") {
		t.Errorf("N's sampling beside B's call: result %q (isError %v), want an error that names interactive_pool, not stateful: true", got, isErr)
	}
	cancelB()
	if err := testwait.Recv(t, held, "B's cancelled call to return"); err == nil {
		t.Error("B's cancelled call returned no error")
	}
	if !fidWaitEvent(up, "cancel hold", testwait.Long) {
		t.Error("B's cancellation never reached the upstream")
	}
	if got := inA.get(); !slices.Equal(got, []string{"question from A"}) {
		t.Errorf("A's sampling handler saw %q, want only its own question", got)
	}
	if got := inB.get(); len(got) != 0 {
		t.Errorf("B's sampling handler saw %q", got)
	}
}

func TestFidelityElicitation(t *testing.T) {
	t.Parallel()
	fidEachKind(t, func(t *testing.T, stdio bool) {
		up := fidUp(t, stdio, "up", 3)
		base := fidGateway(t, "", up)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eliciter := func(name string, inbox *fidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				inbox.add(req.Params.Mode + ":" + req.Params.Message)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "user-" + name}}, nil
			}}
		}
		inA, inB := &fidInbox{}, &fidInbox{}
		a := fidConnect(t, base+"/mcp", eliciter("A", inA))
		b := fidConnect(t, base+"/mcp", eliciter("B", inB))
		n := fidConnect(t, base+"/mcp", nil) // declares no elicitation capability
		if n.InitializeResult() == nil {
			t.Fatal("no initialize result")
		}
		fidRun(stdio,
			func() {
				fidExpect(ctx, t, "A", a, "up__elicit", map[string]any{"tag": "A", "barrier": !stdio}, "tag=A action=accept name=user-A")
			},
			func() {
				fidExpect(ctx, t, "B", b, "up__elicit", map[string]any{"tag": "B", "barrier": !stdio}, "tag=B action=accept name=user-B")
			},
			func() {
				got, isErr, err := fidCall(ctx, n, "up__elicit", map[string]any{"tag": "N", "barrier": !stdio})
				if err != nil {
					// A JSON-RPC error is acceptable too, if it names the capability.
					got, isErr = err.Error(), true
				}
				if !isErr || !strings.Contains(got, "elicitation") || !strings.Contains(got, "capability") {
					t.Errorf("N (no elicitation capability): %q (isError %v), want an error naming the elicitation capability", got, isErr)
				}
			})
		if got := inA.get(); !slices.Equal(got, []string{"form:who is A?"}) {
			t.Errorf("A's elicitation handler saw %q, want only its own form", got)
		}
		if got := inB.get(); !slices.Equal(got, []string{"form:who is B?"}) {
			t.Errorf("B's elicitation handler saw %q, want only its own form", got)
		}
	})
}

func TestFidelityRoots(t *testing.T) {
	t.Parallel()
	fidEachKind(t, func(t *testing.T, stdio bool) {
		cfg := fidUp(t, stdio, "cfg", 0, `roots: [{uri: "file:///srv/data", name: data}]`)
		fwd := fidUp(t, stdio, "fwd", 0, `forward_roots: true`)
		base := fidGateway(t, "", cfg, fwd)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a := fidConnect(t, base+"/mcp", nil, &mcp.Root{URI: "file:///home/a", Name: "a"})
		b := fidConnect(t, base+"/mcp", nil, &mcp.Root{URI: "file:///home/b", Name: "b"}, &mcp.Root{URI: "file:///home/b2", Name: "b2"})
		fidRun(stdio,
			func() { fidExpect(ctx, t, "A", a, "cfg__roots", map[string]any{"tag": "x"}, "file:///srv/data|data") },
			func() { fidExpect(ctx, t, "B", b, "cfg__roots", map[string]any{"tag": "x"}, "file:///srv/data|data") },
			func() { fidExpect(ctx, t, "A", a, "fwd__roots", map[string]any{"tag": "x"}, "file:///home/a|a") },
			func() {
				fidExpect(ctx, t, "B", b, "fwd__roots", map[string]any{"tag": "x"}, "file:///home/b|b,file:///home/b2|b2")
			},
		)
	})
}

func TestFidelityLogging(t *testing.T) {
	t.Parallel()
	logger := func(inbox *fidInbox) *mcp.ClientOptions {
		return &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			inbox.add(fmt.Sprint(req.Params.Level, ":", req.Params.Data))
		}}
	}
	want := map[string][]string{
		"A": {"error:A error"},                // A asked for "error" only
		"B": {"info:B info", "error:B error"}, // B asked for "debug"
	}
	run := func(t *testing.T, stdio bool, stricterLast bool) {
		up := fidUp(t, stdio, "up", 0)
		base := fidGateway(t, "", up)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		inA, inB := &fidInbox{}, &fidInbox{}
		a := fidConnect(t, base+"/mcp", logger(inA))
		b := fidConnect(t, base+"/mcp", logger(inB))
		setA := func() {
			if err := a.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
				t.Fatal(err)
			}
		}
		setB := func() {
			if err := b.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
		}
		if stricterLast {
			setB()
			setA()
		} else {
			setA()
			setB()
		}
		fidRun(stdio,
			func() { fidExpect(ctx, t, "A", a, "up__log", map[string]any{"tag": "A"}, "logged A") },
			func() { fidExpect(ctx, t, "B", b, "up__log", map[string]any{"tag": "B"}, "logged B") })
		inboxes := map[string]*fidInbox{"A": inA, "B": inB}
		got := fidGather(inboxes, want)
		fidCompare(t, got, want)
	}
	fidEachKind(t, func(t *testing.T, stdio bool) {
		t.Run("stricter level set first", func(t *testing.T) { run(t, stdio, false) })
		t.Run("stricter level set last", func(t *testing.T) { run(t, stdio, true) })
	})
}

func TestFidelityResourceSubscriptions(t *testing.T) {
	t.Parallel()
	fidEachKind(t, func(t *testing.T, stdio bool) {
		up := fidUp(t, stdio, "up", 0)
		base := fidGateway(t, "  - path: /mcp\n  - path: /mcp/solo\n    upstreams: [up]\n    prefix: false\n", up)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		watcher := func(inbox *fidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				inbox.add(req.Params.URI)
			}}
		}
		inA, inB, inC := &fidInbox{}, &fidInbox{}, &fidInbox{}
		a := fidConnect(t, base+"/mcp", watcher(inA))
		b := fidConnect(t, base+"/mcp", watcher(inB))
		c := fidConnect(t, base+"/mcp/solo", watcher(inC)) // unprefixed route
		for who, s := range map[string]*mcp.ClientSession{"A": a, "B": b} {
			if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://watched"}); err != nil {
				t.Fatalf("%s subscribe: %v", who, err)
			}
		}
		if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://watched"}); err != nil {
			t.Fatalf("C subscribe: %v", err)
		}
		if !fidWaitEvent(up, "subscribe mem://watched", testwait.Long) {
			t.Fatalf("the upstream saw no subscribe: %q", up.log.all())
		}
		if err := b.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "mem://watched"}); err != nil {
			t.Fatalf("B unsubscribe: %v", err)
		}

		fire := func() {
			t.Helper()
			if stdio {
				fidExpect(ctx, t, "C", c, "touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
				return
			}
			if err := up.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "mem://watched"}); err != nil {
				t.Fatal(err)
			}
		}
		fire()
		fidSettle(t, map[string]*fidInbox{"A": inA, "B": inB, "C": inC}, map[string][]string{
			"A": {"mem://watched"}, // unique: the upstream's own URI, prefixed route
			"C": {"mem://watched"}, // and unprefixed
			// B unsubscribed: nothing.
		})
		evs := up.log.all()
		if fidCount(evs, "subscribe mem://watched") != 1 || fidCount(evs, "unsubscribe mem://watched") != 0 {
			t.Errorf("upstream events %q: want one subscribe and no unsubscribe while A and C still watch", evs)
		}

		// Ending A's session releases its subscription, but C still watches.
		if err := a.Close(); err != nil {
			t.Errorf("close A: %v", err)
		}
		// A negative check (no unsubscribe while C watches): a wait cut
		// short by load only misses a failure, never makes one.
		time.Sleep(300 * time.Millisecond)
		if evs := up.log.all(); fidCount(evs, "unsubscribe mem://watched") != 0 {
			t.Errorf("upstream unsubscribed while C still watches: %q", evs)
		}
		fire()
		fidSettle(t, map[string]*fidInbox{"B": inB, "C": inC}, map[string][]string{
			"C": {"mem://watched", "mem://watched"},
		})
		if got := inA.get(); len(got) != 1 {
			t.Errorf("A received %q after its session ended", got)
		}

		// The last subscriber leaving unsubscribes upstream, once.
		if err := c.Close(); err != nil {
			t.Errorf("close C: %v", err)
		}
		if !fidWaitEvent(up, "unsubscribe mem://watched", testwait.Long) {
			t.Errorf("ending the last subscribed session did not unsubscribe upstream: %q", up.log.all())
		}
		time.Sleep(100 * time.Millisecond) // a negative check (no second unsubscribe), as above
		if evs := up.log.all(); fidCount(evs, "unsubscribe mem://watched") != 1 || fidCount(evs, "subscribe mem://watched") != 1 {
			t.Errorf("upstream events %q: want exactly one subscribe and one unsubscribe", evs)
		}
		if got := inB.get(); len(got) != 0 {
			t.Errorf("B (unsubscribed) received %q", got)
		}
	})
}

func TestFidelityToolListChanged(t *testing.T) {
	t.Parallel()
	fidEachKind(t, func(t *testing.T, stdio bool) {
		up := fidUp(t, stdio, "up", 0)
		other := httpUpstream(t, "other", 0)
		routes := "  - path: /mcp\n    upstreams: [up]\n  - path: /mcp/other\n    upstreams: [other]\n"
		base := fidGateway(t, routes, up, &fidUpstream{entry: fmt.Sprintf("  other:\n    url: %s\n", other)})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		counter := func(inbox *fidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				inbox.add("tools")
			}}
		}
		inA, inB, inX := &fidInbox{}, &fidInbox{}, &fidInbox{}
		a := fidConnect(t, base+"/mcp", counter(inA))
		b := fidConnect(t, base+"/mcp", counter(inB))
		fidConnect(t, base+"/mcp/other", counter(inX)) // a route without up
		add := func(name string) {
			t.Helper()
			if stdio {
				fidExpect(ctx, t, "A", a, "up__grow", map[string]any{"name": name}, "grown "+name)
				return
			}
			mcp.AddTool(up.srv, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return fidResult("up/%s", name), nil, nil
			})
		}
		lists := func(s *mcp.ClientSession, name string) bool {
			res, err := s.ListTools(ctx, nil)
			return err == nil && slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == name })
		}
		// The list changes of the upstreams' start are debounced: a first
		// change, seen by A and B, comes after them (the gateway sends
		// queued changes in order), so the counts below start after them.
		add("marker")
		testwait.Until(t, "A and B to hear of and list up__marker", func() bool {
			return len(inA.get()) > 0 && len(inB.get()) > 0 && lists(a, "up__marker") && lists(b, "up__marker")
		})
		baseA, baseB, baseX := len(inA.get()), len(inB.get()), len(inX.get())

		add("added")
		deadline := time.Now().Add(testwait.Long) // returns as soon as all is there
		for time.Now().Before(deadline) && (len(inA.get()) == baseA || len(inB.get()) == baseB) {
			time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
		}
		if len(inA.get()) == baseA || len(inB.get()) == baseB {
			t.Fatalf("no tools/list_changed: A %d→%d, B %d→%d", baseA, len(inA.get()), baseB, len(inB.get()))
		}
		time.Sleep(300 * time.Millisecond) // a negative check: a wait cut short only misses a failure
		if n := len(inX.get()); n != baseX {
			t.Errorf("a session on a route without the upstream got %d tools/list_changed", n-baseX)
		}
		for who, s := range map[string]*mcp.ClientSession{"A": a, "B": b} {
			res, err := s.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("%s tools/list: %v", who, err)
			}
			if !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "up__added" }) {
				var names []string
				for _, tl := range res.Tools {
					names = append(names, tl.Name)
				}
				t.Errorf("%s tools/list after the change = %v, want up__added in it", who, names)
			}
		}
		fidExpect(ctx, t, "B", b, "up__added", nil, "up/added")
	})
}

// A cancelled call is cancelled upstream too — also over Streamable HTTP
// when it ends before the upstream sent its response headers (the official
// SDK sends them only with its first event, so a silent tool is in that
// state); once a bug, now checked here.
func TestFidelityCancellation(t *testing.T) {
	t.Parallel()
	fidEachKind(t, func(t *testing.T, stdio bool) {
		up := fidUp(t, stdio, "up", 0)
		base := fidGateway(t, "", up)
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
		defer cancel()
		a := fidConnect(t, base+"/mcp", nil)
		b := fidConnect(t, base+"/mcp", nil)

		// Both calls hold until released or cancelled: only the
		// cancellation can end A, and B stays in flight throughout.
		ctxA, cancelA := context.WithCancel(ctx)
		defer cancelA()
		errA := make(chan error, 1)
		go func() {
			_, _, err := fidCall(ctxA, a, "up__block", map[string]any{"tag": "A", "hold": true})
			errA <- err
		}()
		doneB := make(chan struct{})
		go func() {
			defer close(doneB)
			fidExpect(ctx, t, "B", b, "up__block", map[string]any{"tag": "B", "hold": true}, "done B")
		}()
		if !fidWaitEvent(up, "start A", testwait.Long) || !fidWaitEvent(up, "start B", testwait.Long) {
			t.Fatalf("calls did not reach the upstream: %q", up.log.all())
		}
		cancelA()
		if err := testwait.Recv(t, errA, "A's cancelled call to return"); err == nil {
			t.Error("A's cancelled call returned no error")
		}
		cancelled := fidWaitEvent(up, "cancel A", testwait.Long)
		fidExpect(ctx, t, "release", a, "up__release", map[string]any{"tag": "B"}, "released B")
		testwait.Recv(t, doneB, "B's call to finish")
		evs := up.log.all()
		if !slices.Contains(evs, "finish B") || slices.Contains(evs, "cancel B") {
			t.Errorf("upstream events %q: want B finished, not cancelled", evs)
		}
		if !cancelled || slices.Contains(evs, "finish A") {
			t.Errorf("the upstream tool's context was not cancelled: %q", evs)
		}
	})
}

// A call that times out at the gateway is cancelled upstream too (README:
// "Timed-out calls are cancelled upstream"), while a quick call of another
// session on the same upstream is unaffected.
func TestFidelityTimeoutCancelsUpstream(t *testing.T) {
	// Not parallel: a 300 ms upstream timeout must not fire for an immediate call, even on a loaded machine;
	// A holds until the timeout cancels it.
	fidEachKindInTurn(t, func(t *testing.T, stdio bool) {
		up := fidUp(t, stdio, "up", 0, "timeout: 300ms")
		gw, base := fidGatewayGW(t, "", up)
		// The 300 ms also bounds the handshake's requests: a stdio child
		// slow to start on a loaded machine fails them and is retried, so
		// the calls wait for the upstream to be ready.
		testwait.Until(t, "the upstream to be ready", func() bool {
			s, _ := gw.Host().Upstream("up").State()
			return s == host.StateReady
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a := fidConnect(t, base+"/mcp", nil)
		b := fidConnect(t, base+"/mcp", nil)
		fidRun(false,
			func() {
				got, isErr, err := fidCall(ctx, a, "up__block", map[string]any{"tag": "A", "hold": true})
				if err == nil {
					t.Errorf("A: %q (isError %v), want a timeout error", got, isErr)
				} else if !strings.Contains(err.Error(), "300ms") {
					t.Errorf("A: error %q does not say which timeout fired", err)
				}
			},
			func() {
				fidExpect(ctx, t, "B", b, "up__block", map[string]any{"tag": "B", "ms": 0}, "done B")
			})
		cancelled := fidWaitEvent(up, "cancel A", testwait.Long)
		evs := up.log.all()
		if !cancelled {
			t.Errorf("the timed-out call was not cancelled upstream: %q", evs)
		}
	})
}

// The SDK server offers 2026-07-28 by default and the gateway speaks it to
// upstreams that offer it: sessions of legacy (2025-11-25) clients must keep
// working. Sampling comes back as an input_required result the gateway turns
// into a sampling request on the caller's session; a legacy session's
// logging/setLevel and resources/subscribe have no 2026 method of their own
// and must be bridged (per-request log level, subscriptions/listen).
func TestFidelityModernStdioUpstream(t *testing.T) {
	t.Parallel()
	up := fidModernStdioUpstream(t, "up")
	gw, base := fidGatewayGW(t, "", up)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := gw.Host().Upstream("up").Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("the gateway negotiated %s with an upstream configured protocol: \"2026\"", v)
	}

	t.Run("sampling via input_required", func(t *testing.T) {
		inA, inB := &fidInbox{}, &fidInbox{}
		a := fidConnect(t, base+"/mcp", fidSampler("A", inA))
		b := fidConnect(t, base+"/mcp", fidSampler("B", inB))
		// Concurrent even on stdio: the input requests come back in each
		// call's own result, not as unattributed server→client requests.
		fidRun(false,
			func() {
				fidExpect(ctx, t, "A", a, "up__mrtr_sample", map[string]any{"tag": "A"}, "tag=A answer=answer-from-A")
			},
			func() {
				fidExpect(ctx, t, "B", b, "up__mrtr_sample", map[string]any{"tag": "B"}, "tag=B answer=answer-from-B")
			})
		if got := inA.get(); !slices.Equal(got, []string{"question from A"}) {
			t.Errorf("A's sampling handler saw %q, want only its own question", got)
		}
		if got := inB.get(); !slices.Equal(got, []string{"question from B"}) {
			t.Errorf("B's sampling handler saw %q, want only its own question", got)
		}
	})

	t.Run("logging", func(t *testing.T) {
		logger := func(inbox *fidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
				inbox.add(fmt.Sprint(req.Params.Level, ":", req.Params.Data))
			}}
		}
		inA, inB := &fidInbox{}, &fidInbox{}
		a := fidConnect(t, base+"/mcp", logger(inA))
		b := fidConnect(t, base+"/mcp", logger(inB))
		if err := a.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
			t.Fatal(err)
		}
		if err := b.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
		fidRun(true,
			func() { fidExpect(ctx, t, "A", a, "up__log", map[string]any{"tag": "A"}, "logged A") },
			func() { fidExpect(ctx, t, "B", b, "up__log", map[string]any{"tag": "B"}, "logged B") })
		want := map[string][]string{
			"A": {"error:A error"},
			"B": {"info:B info", "error:B error"},
		}
		got := fidGather(map[string]*fidInbox{"A": inA, "B": inB}, want)
		fidCompare(t, got, want)
	})

	t.Run("resource subscriptions", func(t *testing.T) {
		watcher := func(inbox *fidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				inbox.add(req.Params.URI)
			}}
		}
		inA, inB := &fidInbox{}, &fidInbox{}
		a := fidConnect(t, base+"/mcp", watcher(inA))
		b := fidConnect(t, base+"/mcp", watcher(inB))
		for who, s := range map[string]*mcp.ClientSession{"A": a, "B": b} {
			// The upstream has no resources/subscribe: the gateway's client
			// names the URI in its subscriptions/listen stream instead.
			if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://watched"}); err != nil {
				t.Fatalf("%s subscribe: %v", who, err)
			}
		}
		if err := b.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "mem://watched"}); err != nil {
			t.Fatalf("B unsubscribe: %v", err)
		}
		// A subscriptions/listen stream may still be opening when
		// Subscribe returns: touch until A hears of it.
		testwait.Until(t, "A's resource update through subscriptions/listen", func() bool {
			if len(inA.get()) == 0 {
				fidExpect(ctx, t, "A", a, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
			}
			return len(inA.get()) > 0
		})
		// One more touch that A, whose stream is open now, must hear of too.
		n := len(inA.get())
		fidExpect(ctx, t, "A", a, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
		testwait.Until(t, "A's update of the last touch", func() bool { return len(inA.get()) > n })
		// A negative check (B hears nothing): a wait cut short by load
		// only misses a failure, never makes one.
		time.Sleep(150 * time.Millisecond)
		for _, u := range inA.get() {
			if u != "mem://watched" {
				t.Errorf("A received an update of %q", u)
			}
		}
		if got := inB.get(); len(got) != 0 {
			t.Errorf("B (unsubscribed) received %q", got)
		}
	})
}

// A call waiting on a person (its elicitation unanswered for a while) is
// still a candidate on a shared stdio upstream: how long it waited proves
// nothing about who sent the next request, so another session's sampling is
// refused rather than guessed — unlike a bridged call parked by the
// gateway itself (TestBridgeParkedCallLeavesStdioUsable). The owner rule
// alone, without the interactive pool that would give B a child of its own
// (TestFidelityStdioOverlappingSampling).
func TestFidelityStdioWaitingCallStaysAmbiguous(t *testing.T) {
	t.Parallel()
	up := fidStdioUpstream(t, "pipe", "interactive_pool: 0")
	base := fidGateway(t, "", up)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	a := fidConnect(t, base+"/mcp", &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		<-release // a person thinking
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}})
	inB := &fidInbox{}
	b := fidConnect(t, base+"/mcp", fidSampler("B", inB))

	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		fidExpect(ctx, t, "A", a, "pipe__elicit", map[string]any{"tag": "A"}, "tag=A action=accept name=Ada")
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("A was never asked")
	}
	// A while (past the gateway's 1s bounds): it changes nothing. The
	// behaviour under test; a sleep is never shorter than asked.
	time.Sleep(1100 * time.Millisecond)
	got, isErr, err := fidCall(ctx, b, "pipe__sample", map[string]any{"tag": "B"})
	if err != nil || !isErr || !strings.Contains(got, "interactive_pool") {
		t.Errorf("B's sampling while A waits on a person: %q (isError %v, %v), want a refusal naming interactive_pool", got, isErr, err)
	}
	close(release)
	<-doneA
	if got := inB.get(); len(got) != 0 {
		t.Errorf("B's handler saw %q, want nothing (the request was ambiguous)", got)
	}
}

// An upstream that comes back — a restarted child, or one a reload replaced
// (its config changed: a new child) — knows nothing of the subscriptions
// sessions hold on it: the gateway subscribes again, so updates keep coming.
func TestFidelitySubscriptionsSurviveUpstreamReplacement(t *testing.T) {
	t.Parallel()
	for name, replace := range map[string]func(t *testing.T, gw *gateway.Gateway, up *fidUpstream, pid int){
		"child killed": func(t *testing.T, _ *gateway.Gateway, _ *fidUpstream, pid int) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
		"reload replaces it": func(t *testing.T, gw *gateway.Gateway, up *fidUpstream, _ int) {
			if err := gw.Reload(parseConfig(t, "listen: 127.0.0.1:0\nupstreams:\n"+up.entry+"    timeout: 45s\n")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			up := fidStdioUpstream(t, "up")
			gw, base := fidGatewayGW(t, "", up)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			inbox := &fidInbox{}
			a := fidConnect(t, base+"/mcp", &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				inbox.add(req.Params.URI)
			}})
			if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://watched"}); err != nil {
				t.Fatal(err)
			}
			pid := gw.Host().Upstream("up").PID()
			if pid == 0 {
				t.Fatal("no child pid")
			}
			replace(t, gw, up, pid)
			deadline := time.Now().Add(10 * time.Second)
			for fidCount(up.log.all(), "subscribe mem://watched") < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("the new upstream child was not subscribed again: %q", up.log.all())
				}
				time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
			}
			if p := gw.Host().Upstream("up").PID(); p == pid || p == 0 {
				t.Fatalf("child pid %d afterwards (was %d): the upstream was not replaced", p, pid)
			}
			fidExpect(ctx, t, "A", a, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
			fidSettle(t, map[string]*fidInbox{"A": inbox}, map[string][]string{"A": {"mem://watched"}})
		})
	}
}
