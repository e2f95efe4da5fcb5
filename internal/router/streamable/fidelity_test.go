package streamable_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
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

func TestFidelitySamplingReachesItsCaller(t *testing.T) {
	t.Parallel()
	gatewaytest.FidEachKind(t, func(t *testing.T, stdio bool) {
		up := gatewaytest.FidUp(t, stdio, "up", 2)
		base := gatewaytest.FidGateway(t, "", up)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
		a := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("A", inA))
		b := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("B", inB))
		// On HTTP both tools meet at a barrier before sampling, so both
		// sampling requests are in flight at once.
		gatewaytest.FidRun(stdio,
			func() {
				gatewaytest.FidExpect(ctx, t, "A", a, "up__sample", map[string]any{"tag": "A", "barrier": !stdio}, "tag=A answer=answer-from-A")
			},
			func() {
				gatewaytest.FidExpect(ctx, t, "B", b, "up__sample", map[string]any{"tag": "B", "barrier": !stdio}, "tag=B answer=answer-from-B")
			})
		if got := inA.Get(); !slices.Equal(got, []string{"question from A"}) {
			t.Errorf("A's sampling handler saw %q, want only its own question", got)
		}
		if got := inB.Get(); !slices.Equal(got, []string{"question from B"}) {
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
	up := gatewaytest.FidStdioUpstream(t, "pipe")
	base := gatewaytest.FidGateway(t, "", up)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
	a := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("A", inA))
	b := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("B", inB))
	n := gatewaytest.FidConnect(t, base+"/mcp", nil) // declares no sampling capability

	// B's call is in flight (on the shared child) until B cancels it.
	ctxB, cancelB := context.WithCancel(ctx)
	defer cancelB()
	held := make(chan error, 1)
	go func() {
		_, _, err := gatewaytest.FidCall(ctxB, b, "pipe__block", map[string]any{"tag": "hold", "hold": true})
		held <- err
	}()
	if !gatewaytest.FidWaitEvent(up, "start hold", testwait.Long) {
		t.Fatal("B's call never reached the upstream")
	}
	// The first overlap, on a fresh gateway: served, on a child of its own.
	gatewaytest.FidExpect(ctx, t, "A", a, "pipe__sample", map[string]any{"tag": "A"}, "tag=A answer=answer-from-A")
	// A client that cannot be asked, beside B's call: its upstream's
	// request has two candidates and is refused; B never sees it.
	got, isErr, err := gatewaytest.FidCall(ctx, n, "pipe__sample", map[string]any{"tag": "N"})
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
	if !gatewaytest.FidWaitEvent(up, "cancel hold", testwait.Long) {
		t.Error("B's cancellation never reached the upstream")
	}
	if got := inA.Get(); !slices.Equal(got, []string{"question from A"}) {
		t.Errorf("A's sampling handler saw %q, want only its own question", got)
	}
	if got := inB.Get(); len(got) != 0 {
		t.Errorf("B's sampling handler saw %q", got)
	}
}

func TestFidelityElicitation(t *testing.T) {
	t.Parallel()
	gatewaytest.FidEachKind(t, func(t *testing.T, stdio bool) {
		up := gatewaytest.FidUp(t, stdio, "up", 3)
		base := gatewaytest.FidGateway(t, "", up)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eliciter := func(name string, inbox *gatewaytest.FidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				inbox.Add(req.Params.Mode + ":" + req.Params.Message)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "user-" + name}}, nil
			}}
		}
		inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
		a := gatewaytest.FidConnect(t, base+"/mcp", eliciter("A", inA))
		b := gatewaytest.FidConnect(t, base+"/mcp", eliciter("B", inB))
		n := gatewaytest.FidConnect(t, base+"/mcp", nil) // declares no elicitation capability
		if n.InitializeResult() == nil {
			t.Fatal("no initialize result")
		}
		gatewaytest.FidRun(stdio,
			func() {
				gatewaytest.FidExpect(ctx, t, "A", a, "up__elicit", map[string]any{"tag": "A", "barrier": !stdio}, "tag=A action=accept name=user-A")
			},
			func() {
				gatewaytest.FidExpect(ctx, t, "B", b, "up__elicit", map[string]any{"tag": "B", "barrier": !stdio}, "tag=B action=accept name=user-B")
			},
			func() {
				got, isErr, err := gatewaytest.FidCall(ctx, n, "up__elicit", map[string]any{"tag": "N", "barrier": !stdio})
				if err != nil {
					// A JSON-RPC error is acceptable too, if it names the capability.
					got, isErr = err.Error(), true
				}
				if !isErr || !strings.Contains(got, "elicitation") || !strings.Contains(got, "capability") {
					t.Errorf("N (no elicitation capability): %q (isError %v), want an error naming the elicitation capability", got, isErr)
				}
			})
		if got := inA.Get(); !slices.Equal(got, []string{"form:who is A?"}) {
			t.Errorf("A's elicitation handler saw %q, want only its own form", got)
		}
		if got := inB.Get(); !slices.Equal(got, []string{"form:who is B?"}) {
			t.Errorf("B's elicitation handler saw %q, want only its own form", got)
		}
	})
}

func TestFidelityRoots(t *testing.T) {
	t.Parallel()
	gatewaytest.FidEachKind(t, func(t *testing.T, stdio bool) {
		cfg := gatewaytest.FidUp(t, stdio, "cfg", 0, `roots: [{uri: "file:///srv/data", name: data}]`)
		fwd := gatewaytest.FidUp(t, stdio, "fwd", 0, `forward_roots: true`)
		base := gatewaytest.FidGateway(t, "", cfg, fwd)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a := gatewaytest.FidConnect(t, base+"/mcp", nil, &mcp.Root{URI: "file:///home/a", Name: "a"})
		b := gatewaytest.FidConnect(t, base+"/mcp", nil, &mcp.Root{URI: "file:///home/b", Name: "b"}, &mcp.Root{URI: "file:///home/b2", Name: "b2"})
		gatewaytest.FidRun(stdio,
			func() {
				gatewaytest.FidExpect(ctx, t, "A", a, "cfg__roots", map[string]any{"tag": "x"}, "file:///srv/data|data")
			},
			func() {
				gatewaytest.FidExpect(ctx, t, "B", b, "cfg__roots", map[string]any{"tag": "x"}, "file:///srv/data|data")
			},
			func() {
				gatewaytest.FidExpect(ctx, t, "A", a, "fwd__roots", map[string]any{"tag": "x"}, "file:///home/a|a")
			},
			func() {
				gatewaytest.FidExpect(ctx, t, "B", b, "fwd__roots", map[string]any{"tag": "x"}, "file:///home/b|b,file:///home/b2|b2")
			},
		)
	})
}

func TestFidelityLogging(t *testing.T) {
	t.Parallel()
	logger := func(inbox *gatewaytest.FidInbox) *mcp.ClientOptions {
		return &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			inbox.Add(fmt.Sprint(req.Params.Level, ":", req.Params.Data))
		}}
	}
	want := map[string][]string{
		"A": {"error:A error"},                // A asked for "error" only
		"B": {"info:B info", "error:B error"}, // B asked for "debug"
	}
	run := func(t *testing.T, stdio bool, stricterLast bool) {
		up := gatewaytest.FidUp(t, stdio, "up", 0)
		base := gatewaytest.FidGateway(t, "", up)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
		a := gatewaytest.FidConnect(t, base+"/mcp", logger(inA))
		b := gatewaytest.FidConnect(t, base+"/mcp", logger(inB))
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
		gatewaytest.FidRun(stdio,
			func() { gatewaytest.FidExpect(ctx, t, "A", a, "up__log", map[string]any{"tag": "A"}, "logged A") },
			func() { gatewaytest.FidExpect(ctx, t, "B", b, "up__log", map[string]any{"tag": "B"}, "logged B") })
		inboxes := map[string]*gatewaytest.FidInbox{"A": inA, "B": inB}
		got := gatewaytest.FidGather(inboxes, want)
		gatewaytest.FidCompare(t, got, want)
	}
	gatewaytest.FidEachKind(t, func(t *testing.T, stdio bool) {
		t.Run("stricter level set first", func(t *testing.T) { run(t, stdio, false) })
		t.Run("stricter level set last", func(t *testing.T) { run(t, stdio, true) })
	})
}

func TestFidelityResourceSubscriptions(t *testing.T) {
	t.Parallel()
	gatewaytest.FidEachKind(t, func(t *testing.T, stdio bool) {
		up := gatewaytest.FidUp(t, stdio, "up", 0)
		base := gatewaytest.FidGateway(t, "  - path: /mcp\n  - path: /mcp/solo\n    upstreams: [up]\n    prefix: false\n", up)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		watcher := func(inbox *gatewaytest.FidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				inbox.Add(req.Params.URI)
			}}
		}
		inA, inB, inC := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
		a := gatewaytest.FidConnect(t, base+"/mcp", watcher(inA))
		b := gatewaytest.FidConnect(t, base+"/mcp", watcher(inB))
		c := gatewaytest.FidConnect(t, base+"/mcp/solo", watcher(inC)) // unprefixed route
		for who, s := range map[string]*mcp.ClientSession{"A": a, "B": b} {
			if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://watched"}); err != nil {
				t.Fatalf("%s subscribe: %v", who, err)
			}
		}
		if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://watched"}); err != nil {
			t.Fatalf("C subscribe: %v", err)
		}
		if !gatewaytest.FidWaitEvent(up, "subscribe mem://watched", testwait.Long) {
			t.Fatalf("the upstream saw no subscribe: %q", up.Log.All())
		}
		if err := b.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "mem://watched"}); err != nil {
			t.Fatalf("B unsubscribe: %v", err)
		}

		fire := func() {
			t.Helper()
			if stdio {
				gatewaytest.FidExpect(ctx, t, "C", c, "touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
				return
			}
			if err := up.Srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "mem://watched"}); err != nil {
				t.Fatal(err)
			}
		}
		fire()
		gatewaytest.FidSettle(t, map[string]*gatewaytest.FidInbox{"A": inA, "B": inB, "C": inC}, map[string][]string{
			"A": {"mem://watched"}, // unique: the upstream's own URI, prefixed route
			"C": {"mem://watched"}, // and unprefixed
			// B unsubscribed: nothing.
		})
		evs := up.Log.All()
		if gatewaytest.FidCount(evs, "subscribe mem://watched") != 1 || gatewaytest.FidCount(evs, "unsubscribe mem://watched") != 0 {
			t.Errorf("upstream events %q: want one subscribe and no unsubscribe while A and C still watch", evs)
		}

		// Ending A's session releases its subscription, but C still watches.
		if err := a.Close(); err != nil {
			t.Errorf("close A: %v", err)
		}
		// A negative check (no unsubscribe while C watches): a wait cut
		// short by load only misses a failure, never makes one.
		time.Sleep(300 * time.Millisecond)
		if evs := up.Log.All(); gatewaytest.FidCount(evs, "unsubscribe mem://watched") != 0 {
			t.Errorf("upstream unsubscribed while C still watches: %q", evs)
		}
		fire()
		gatewaytest.FidSettle(t, map[string]*gatewaytest.FidInbox{"B": inB, "C": inC}, map[string][]string{
			"C": {"mem://watched", "mem://watched"},
		})
		if got := inA.Get(); len(got) != 1 {
			t.Errorf("A received %q after its session ended", got)
		}

		// The last subscriber leaving unsubscribes upstream, once.
		if err := c.Close(); err != nil {
			t.Errorf("close C: %v", err)
		}
		if !gatewaytest.FidWaitEvent(up, "unsubscribe mem://watched", testwait.Long) {
			t.Errorf("ending the last subscribed session did not unsubscribe upstream: %q", up.Log.All())
		}
		time.Sleep(100 * time.Millisecond) // a negative check (no second unsubscribe), as above
		if evs := up.Log.All(); gatewaytest.FidCount(evs, "unsubscribe mem://watched") != 1 || gatewaytest.FidCount(evs, "subscribe mem://watched") != 1 {
			t.Errorf("upstream events %q: want exactly one subscribe and one unsubscribe", evs)
		}
		if got := inB.Get(); len(got) != 0 {
			t.Errorf("B (unsubscribed) received %q", got)
		}
	})
}

func TestFidelityToolListChanged(t *testing.T) {
	t.Parallel()
	gatewaytest.FidEachKind(t, func(t *testing.T, stdio bool) {
		up := gatewaytest.FidUp(t, stdio, "up", 0)
		other := gatewaytest.HTTPUpstream(t, "other", 0)
		routes := "  - path: /mcp\n    upstreams: [up]\n  - path: /mcp/other\n    upstreams: [other]\n"
		base := gatewaytest.FidGateway(t, routes, up, &gatewaytest.FidUpstream{Entry: fmt.Sprintf("  other:\n    url: %s\n", other)})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		counter := func(inbox *gatewaytest.FidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				inbox.Add("tools")
			}}
		}
		inA, inB, inX := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
		a := gatewaytest.FidConnect(t, base+"/mcp", counter(inA))
		b := gatewaytest.FidConnect(t, base+"/mcp", counter(inB))
		gatewaytest.FidConnect(t, base+"/mcp/other", counter(inX)) // a route without up
		add := func(name string) {
			t.Helper()
			if stdio {
				gatewaytest.FidExpect(ctx, t, "A", a, "up__grow", map[string]any{"name": name}, "grown "+name)
				return
			}
			mcp.AddTool(up.Srv, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return gatewaytest.FidResult("up/%s", name), nil, nil
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
			return len(inA.Get()) > 0 && len(inB.Get()) > 0 && lists(a, "up__marker") && lists(b, "up__marker")
		})
		baseA, baseB, baseX := len(inA.Get()), len(inB.Get()), len(inX.Get())

		add("added")
		deadline := time.Now().Add(testwait.Long) // returns as soon as all is there
		for time.Now().Before(deadline) && (len(inA.Get()) == baseA || len(inB.Get()) == baseB) {
			time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
		}
		if len(inA.Get()) == baseA || len(inB.Get()) == baseB {
			t.Fatalf("no tools/list_changed: A %d→%d, B %d→%d", baseA, len(inA.Get()), baseB, len(inB.Get()))
		}
		time.Sleep(300 * time.Millisecond) // a negative check: a wait cut short only misses a failure
		if n := len(inX.Get()); n != baseX {
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
		gatewaytest.FidExpect(ctx, t, "B", b, "up__added", nil, "up/added")
	})
}

// A cancelled call is cancelled upstream too — also over Streamable HTTP
// when it ends before the upstream sent its response headers (the official
// SDK sends them only with its first event, so a silent tool is in that
// state); once a bug, now checked here.
func TestFidelityCancellation(t *testing.T) {
	t.Parallel()
	gatewaytest.FidEachKind(t, func(t *testing.T, stdio bool) {
		up := gatewaytest.FidUp(t, stdio, "up", 0)
		base := gatewaytest.FidGateway(t, "", up)
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
		defer cancel()
		a := gatewaytest.FidConnect(t, base+"/mcp", nil)
		b := gatewaytest.FidConnect(t, base+"/mcp", nil)

		// Both calls hold until released or cancelled: only the
		// cancellation can end A, and B stays in flight throughout.
		ctxA, cancelA := context.WithCancel(ctx)
		defer cancelA()
		errA := make(chan error, 1)
		go func() {
			_, _, err := gatewaytest.FidCall(ctxA, a, "up__block", map[string]any{"tag": "A", "hold": true})
			errA <- err
		}()
		doneB := make(chan struct{})
		go func() {
			defer close(doneB)
			gatewaytest.FidExpect(ctx, t, "B", b, "up__block", map[string]any{"tag": "B", "hold": true}, "done B")
		}()
		if !gatewaytest.FidWaitEvent(up, "start A", testwait.Long) || !gatewaytest.FidWaitEvent(up, "start B", testwait.Long) {
			t.Fatalf("calls did not reach the upstream: %q", up.Log.All())
		}
		cancelA()
		if err := testwait.Recv(t, errA, "A's cancelled call to return"); err == nil {
			t.Error("A's cancelled call returned no error")
		}
		cancelled := gatewaytest.FidWaitEvent(up, "cancel A", testwait.Long)
		gatewaytest.FidExpect(ctx, t, "release", a, "up__release", map[string]any{"tag": "B"}, "released B")
		testwait.Recv(t, doneB, "B's call to finish")
		evs := up.Log.All()
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
	gatewaytest.FidEachKindInTurn(t, func(t *testing.T, stdio bool) {
		up := gatewaytest.FidUp(t, stdio, "up", 0, "timeout: 300ms")
		gw, base := gatewaytest.FidGatewayGW(t, "", up)
		// The 300 ms also bounds the handshake's requests: a stdio child
		// slow to start on a loaded machine fails them and is retried, so
		// the calls wait for the upstream to be ready.
		testwait.Until(t, "the upstream to be ready", func() bool {
			s, _ := gw.Host().Upstream("up").State()
			return s == host.StateReady
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a := gatewaytest.FidConnect(t, base+"/mcp", nil)
		b := gatewaytest.FidConnect(t, base+"/mcp", nil)
		gatewaytest.FidRun(false,
			func() {
				got, isErr, err := gatewaytest.FidCall(ctx, a, "up__block", map[string]any{"tag": "A", "hold": true})
				if err == nil {
					t.Errorf("A: %q (isError %v), want a timeout error", got, isErr)
				} else if !strings.Contains(err.Error(), "300ms") {
					t.Errorf("A: error %q does not say which timeout fired", err)
				}
			},
			func() {
				gatewaytest.FidExpect(ctx, t, "B", b, "up__block", map[string]any{"tag": "B", "ms": 0}, "done B")
			})
		cancelled := gatewaytest.FidWaitEvent(up, "cancel A", testwait.Long)
		evs := up.Log.All()
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
	up := gatewaytest.FidModernStdioUpstream(t, "up")
	gw, base := gatewaytest.FidGatewayGW(t, "", up)
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
		inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
		a := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("A", inA))
		b := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("B", inB))
		// Concurrent even on stdio: the input requests come back in each
		// call's own result, not as unattributed server→client requests.
		gatewaytest.FidRun(false,
			func() {
				gatewaytest.FidExpect(ctx, t, "A", a, "up__mrtr_sample", map[string]any{"tag": "A"}, "tag=A answer=answer-from-A")
			},
			func() {
				gatewaytest.FidExpect(ctx, t, "B", b, "up__mrtr_sample", map[string]any{"tag": "B"}, "tag=B answer=answer-from-B")
			})
		if got := inA.Get(); !slices.Equal(got, []string{"question from A"}) {
			t.Errorf("A's sampling handler saw %q, want only its own question", got)
		}
		if got := inB.Get(); !slices.Equal(got, []string{"question from B"}) {
			t.Errorf("B's sampling handler saw %q, want only its own question", got)
		}
	})

	t.Run("logging", func(t *testing.T) {
		logger := func(inbox *gatewaytest.FidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
				inbox.Add(fmt.Sprint(req.Params.Level, ":", req.Params.Data))
			}}
		}
		inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
		a := gatewaytest.FidConnect(t, base+"/mcp", logger(inA))
		b := gatewaytest.FidConnect(t, base+"/mcp", logger(inB))
		if err := a.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
			t.Fatal(err)
		}
		if err := b.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
		gatewaytest.FidRun(true,
			func() { gatewaytest.FidExpect(ctx, t, "A", a, "up__log", map[string]any{"tag": "A"}, "logged A") },
			func() { gatewaytest.FidExpect(ctx, t, "B", b, "up__log", map[string]any{"tag": "B"}, "logged B") })
		want := map[string][]string{
			"A": {"error:A error"},
			"B": {"info:B info", "error:B error"},
		}
		got := gatewaytest.FidGather(map[string]*gatewaytest.FidInbox{"A": inA, "B": inB}, want)
		gatewaytest.FidCompare(t, got, want)
	})

	t.Run("resource subscriptions", func(t *testing.T) {
		watcher := func(inbox *gatewaytest.FidInbox) *mcp.ClientOptions {
			return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				inbox.Add(req.Params.URI)
			}}
		}
		inA, inB := &gatewaytest.FidInbox{}, &gatewaytest.FidInbox{}
		a := gatewaytest.FidConnect(t, base+"/mcp", watcher(inA))
		b := gatewaytest.FidConnect(t, base+"/mcp", watcher(inB))
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
			if len(inA.Get()) == 0 {
				gatewaytest.FidExpect(ctx, t, "A", a, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
			}
			return len(inA.Get()) > 0
		})
		// One more touch that A, whose stream is open now, must hear of too.
		n := len(inA.Get())
		gatewaytest.FidExpect(ctx, t, "A", a, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
		testwait.Until(t, "A's update of the last touch", func() bool { return len(inA.Get()) > n })
		// A negative check (B hears nothing): a wait cut short by load
		// only misses a failure, never makes one.
		time.Sleep(150 * time.Millisecond)
		for _, u := range inA.Get() {
			if u != "mem://watched" {
				t.Errorf("A received an update of %q", u)
			}
		}
		if got := inB.Get(); len(got) != 0 {
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
	up := gatewaytest.FidStdioUpstream(t, "pipe", "interactive_pool: 0")
	base := gatewaytest.FidGateway(t, "", up)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	a := gatewaytest.FidConnect(t, base+"/mcp", &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		<-release // a person thinking
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}})
	inB := &gatewaytest.FidInbox{}
	b := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("B", inB))

	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		gatewaytest.FidExpect(ctx, t, "A", a, "pipe__elicit", map[string]any{"tag": "A"}, "tag=A action=accept name=Ada")
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("A was never asked")
	}
	// A while (past the gateway's 1s bounds): it changes nothing. The
	// behaviour under test; a sleep is never shorter than asked.
	time.Sleep(1100 * time.Millisecond)
	got, isErr, err := gatewaytest.FidCall(ctx, b, "pipe__sample", map[string]any{"tag": "B"})
	if err != nil || !isErr || !strings.Contains(got, "interactive_pool") {
		t.Errorf("B's sampling while A waits on a person: %q (isError %v, %v), want a refusal naming interactive_pool", got, isErr, err)
	}
	close(release)
	<-doneA
	if got := inB.Get(); len(got) != 0 {
		t.Errorf("B's handler saw %q, want nothing (the request was ambiguous)", got)
	}
}

// An upstream that comes back — a restarted child, or one a reload replaced
// (its config changed: a new child) — knows nothing of the subscriptions
// sessions hold on it: the gateway subscribes again, so updates keep coming.
func TestFidelitySubscriptionsSurviveUpstreamReplacement(t *testing.T) {
	t.Parallel()
	for name, replace := range map[string]func(t *testing.T, gw *gateway.Gateway, up *gatewaytest.FidUpstream, pid int){
		"child killed": func(t *testing.T, _ *gateway.Gateway, _ *gatewaytest.FidUpstream, pid int) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
		"reload replaces it": func(t *testing.T, gw *gateway.Gateway, up *gatewaytest.FidUpstream, _ int) {
			if err := gw.Reload(gatewaytest.ParseConfig(t, "listen: 127.0.0.1:0\nupstreams:\n"+up.Entry+"    timeout: 45s\n")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			up := gatewaytest.FidStdioUpstream(t, "up")
			gw, base := gatewaytest.FidGatewayGW(t, "", up)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			inbox := &gatewaytest.FidInbox{}
			a := gatewaytest.FidConnect(t, base+"/mcp", &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				inbox.Add(req.Params.URI)
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
			for gatewaytest.FidCount(up.Log.All(), "subscribe mem://watched") < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("the new upstream child was not subscribed again: %q", up.Log.All())
				}
				time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
			}
			if p := gw.Host().Upstream("up").PID(); p == pid || p == 0 {
				t.Fatalf("child pid %d afterwards (was %d): the upstream was not replaced", p, pid)
			}
			gatewaytest.FidExpect(ctx, t, "A", a, "up__touch", map[string]any{"uri": "mem://watched"}, "touched mem://watched")
			gatewaytest.FidSettle(t, map[string]*gatewaytest.FidInbox{"A": inbox}, map[string][]string{"A": {"mem://watched"}})
		})
	}
}
