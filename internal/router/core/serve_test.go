package core

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// recStream records what Serve writes, and fails the test if two writes
// overlap or one comes after Serve returned.
type recStream struct {
	t        *testing.T
	busy     atomic.Bool
	returned atomic.Bool
	mu       sync.Mutex
	got      []string // methods of the messages, "hold" for HoldPassed
	onEmit   func(m *jsonrpc.Message)
	onHold   func() // after a HoldPassed is recorded
}

func (s *recStream) enter() {
	if s.busy.Swap(true) {
		s.t.Error("two writes of one stream at once")
	}
	if s.returned.Load() {
		s.t.Error("a write after Serve returned")
	}
}

func (s *recStream) Emit(b []byte) {
	s.enter()
	defer s.busy.Store(false)
	m, err := jsonrpc.Parse(b)
	if err != nil {
		s.t.Errorf("event %s: %v", b, err)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, m.Method)
	s.mu.Unlock()
	if s.onEmit != nil {
		s.onEmit(m)
	}
}

func (s *recStream) HoldPassed() {
	s.enter()
	defer s.busy.Store(false)
	s.mu.Lock()
	s.got = append(s.got, "hold")
	s.mu.Unlock()
	if s.onHold != nil {
		s.onHold()
	}
}

func (s *recStream) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// Serve runs the call on the caller's goroutine; what the upstream sends
// meanwhile reaches the stream in order and before the answer, and a
// server→client request is relayed and answered.
func TestServe(t *testing.T) {
	f := newFixture(t, false)
	t.Run("progress", func(t *testing.T) {
		out := &recStream{t: t}
		resp := f.core.Serve(context.Background(), f.session(`{}`), request(mcp.MethodToolsCall, `{"name":"up__progress","arguments":{},"_meta":{"progressToken":"tok"}}`), nil, out, time.Minute)
		out.returned.Store(true)
		if text(t, resp) != "progressed" {
			t.Fatalf("answer %s %+v", resp.Result, resp.Error)
		}
		if got := out.events(); !slices.Equal(got, []string{mcp.NotificationProgress, mcp.NotificationProgress, mcp.NotificationProgress}) {
			t.Errorf("stream %v, want three progress notifications and no hold", got)
		}
	})
	t.Run("server request relayed", func(t *testing.T) {
		sess := f.session(`{"sampling":{}}`)
		out := &recStream{t: t}
		out.onEmit = func(m *jsonrpc.Message) { // on the pump, while the call waits for it
			if m.Kind() == jsonrpc.KindRequest {
				sess.Answer(jsonrpc.NewResult(m.ID, json.RawMessage(`{"role":"assistant","model":"m","content":{"type":"text","text":"four"}}`)))
			}
		}
		resp := f.core.Serve(context.Background(), sess, request(mcp.MethodToolsCall, `{"name":"up__sample","arguments":{"text":"2+2?"}}`), nil, out, 0)
		out.returned.Store(true)
		if text(t, resp) != "sampled:four" || !slices.Equal(out.events(), []string{mcp.MethodSamplingCreateMessage}) {
			t.Errorf("answer %s, stream %v; want sampled:four after one sampling request", resp.Result, out.events())
		}
	})
	t.Run("capability not declared", func(t *testing.T) {
		out := &recStream{t: t}
		resp := f.core.Serve(context.Background(), f.session(`{}`), request(mcp.MethodToolsCall, `{"name":"up__sample","arguments":{"text":"?"}}`), nil, out, 0)
		out.returned.Store(true)
		if !strings.Contains(text(t, resp), "sampling failed") || len(out.events()) != 0 {
			t.Errorf("answer %s, stream %v; want the upstream's own sampling failure and nothing relayed to a client without sampling", resp.Result, out.events())
		}
	})
	t.Run("hold passes", func(t *testing.T) {
		// The client answers the sampling request only after the hold:
		// the hold passes while the call runs, once, and Serve still
		// returns the answer with nothing written after it.
		sess := f.session(`{"sampling":{}}`)
		held := make(chan struct{})
		out := &recStream{t: t, onHold: sync.OnceFunc(func() { close(held) })}
		out.onEmit = func(m *jsonrpc.Message) {
			if m.Kind() == jsonrpc.KindRequest {
				go func() {
					select { // answered once the hold passed, not 100ms later
					case <-held:
					case <-time.After(testwait.Long): // the hold never passed: the test fails on the stream below
					}
					sess.Answer(jsonrpc.NewResult(m.ID, json.RawMessage(`{"role":"assistant","model":"m","content":{"type":"text","text":"late"}}`)))
				}()
			}
		}
		resp := f.core.Serve(context.Background(), sess, request(mcp.MethodToolsCall, `{"name":"up__sample","arguments":{"text":"?"}}`), nil, out, 20*time.Millisecond)
		out.returned.Store(true)
		if text(t, resp) != "sampled:late" {
			t.Fatalf("answer %s %+v", resp.Result, resp.Error)
		}
		got := out.events()
		if !slices.Equal(got, []string{mcp.MethodSamplingCreateMessage, "hold"}) && !slices.Equal(got, []string{"hold", mcp.MethodSamplingCreateMessage}) {
			t.Errorf("stream %v, want the sampling request and the hold once each", got)
		}
	})
	t.Run("quick call", func(t *testing.T) {
		out := &recStream{t: t}
		resp := f.core.Serve(context.Background(), f.session(`{}`), request(mcp.MethodToolsCall, `{"name":"up__echo","arguments":{"text":"hi"}}`), nil, out, 30*time.Millisecond)
		out.returned.Store(true)
		if text(t, resp) != "echo:hi" {
			t.Fatalf("answer %s %+v", resp.Result, resp.Error)
		}
		// A negative check: the hold's time passes after the answer, and
		// nothing may be written then. A wait cut short by load only
		// misses a failure, never makes one.
		time.Sleep(60 * time.Millisecond)
		// Nothing after the answer (recStream fails a write after Serve
		// returned); before it, at most the hold, when a loaded machine
		// took longer than 30ms to answer.
		if got := out.events(); len(got) > 1 || (len(got) == 1 && got[0] != "hold") {
			t.Errorf("stream %v, want nothing but, under load, the hold", got)
		}
	})
	t.Run("after Close", func(t *testing.T) {
		g := newFixture(t, false)
		g.core.Close(func() {})
		resp := g.core.Serve(context.Background(), g.session(`{}`), request(mcp.MethodToolsCall, `{"name":"up__echo","arguments":{"text":"hi"}}`), nil, &recStream{t: t}, 0)
		if resp.Error == nil || resp.Error.Code != mcp.CodeUpstreamUnavailable {
			t.Errorf("answer %+v, want the shutdown error", resp)
		}
	})
}

// A pump the hold started, before the call sent anything, still carries
// what the call sends next, after the hold.
func TestPumpStartedByHold(t *testing.T) {
	f := newFixture(t, false)
	out := &recStream{t: t}
	p := &pump{core: f.core, sess: f.session(`{}`), out: out}
	p.holdPassed()
	testwait.Until(t, "the pump to run the hold", func() bool { return len(out.events()) >= 1 })
	// The pump then waits for more; a little time lets it get there (a
	// pump that has not yet only makes the test less searching, never
	// fail).
	time.Sleep(20 * time.Millisecond)
	sendProgress(p, out, 2)
	if q := p.finish(); len(q) > 0 {
		t.Errorf("%d messages left in the queue of a running pump", len(q))
	}
	if got := out.events(); !slices.Equal(got, []string{"hold", mcp.NotificationProgress}) {
		t.Errorf("stream %v, want the hold, then the progress notification", got)
	}
}

// sendProgress queues a progress notification on p as the call's reader
// does, and waits (up to testwait.Long) until out has recorded n writes.
func sendProgress(p *pump, out *recStream, n int) {
	b, _ := jsonrpc.Encode(jsonrpc.NewNotification(mcp.NotificationProgress, json.RawMessage(`{"progressToken":"t","progress":1}`)))
	p.core.ChargeQueued(p.sess, len(b)) // as CallStream does (queuebytes.go)
	p.queue() <- b
	p.kick()
	for deadline := time.Now().Add(testwait.Long); len(out.events()) < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // a poll, bounded by deadline; the caller checks the events
	}
}

// quietStream is a recStream that is a QuietHold.
type quietStream struct{ recStream }

func (*quietStream) QuietHold() {}

// A QuietHold stream's hold starts no pump while the call has sent
// nothing; a message after the hold comes just after HoldPassed.
func TestQuietHold(t *testing.T) {
	f := newFixture(t, false)
	t.Run("nothing sent", func(t *testing.T) {
		out := &quietStream{recStream{t: t}}
		p := &pump{core: f.core, sess: f.session(`{}`), out: out, quiet: true}
		p.holdPassed()
		p.mu.Lock()
		running := p.running
		p.mu.Unlock()
		if running {
			t.Error("the hold of a call that sent nothing started a pump")
		}
		if q := p.finish(); q != nil || len(out.events()) != 0 {
			t.Errorf("stream %v, queue %v: want nothing written", out.events(), q)
		}
	})
	t.Run("sent after the hold", func(t *testing.T) {
		out := &quietStream{recStream{t: t}}
		p := &pump{core: f.core, sess: f.session(`{}`), out: out, quiet: true}
		p.holdPassed()
		sendProgress(p, &out.recStream, 2)
		p.finish()
		if got := out.events(); !slices.Equal(got, []string{"hold", mcp.NotificationProgress}) {
			t.Errorf("stream %v, want the hold, then the progress notification", got)
		}
	})
	t.Run("Serve", func(t *testing.T) {
		// Serve sees the marker: a call that outlasts its hold with
		// nothing to send writes nothing but its answer, where a plain
		// stream is told of its hold (a priming event's moment).
		// The call is in flight until the hold was told, however late
		// the hold's timer fires.
		// Its upstream has a tool that answers only when the test lets it.
		release := make(chan struct{})
		srv := upstreamServer(false)
		sdk.AddTool(srv, &sdk.Tool{Name: "held"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			select {
			case <-release:
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "released"}}}, nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
		f := newFixtureWith(t, srv, false)
		quiet, plain := &quietStream{recStream{t: t}}, &recStream{t: t}
		for _, out := range []Stream{quiet, plain} {
			told := f.core.holds.told.Load()
			answer := make(chan *jsonrpc.Message, 1)
			go func() {
				answer <- f.core.Serve(context.Background(), f.session(`{}`), request(mcp.MethodToolsCall, `{"name":"up__held"}`), nil, out, 10*time.Millisecond)
			}()
			testwait.Until(t, "the call's hold to pass", func() bool { return f.core.holds.told.Load() > told })
			select {
			case release <- struct{}{}:
			case <-time.After(testwait.Long): // a bound on the event, far above its time
				t.Fatal("the held call never reached the upstream")
			}
			if resp := testwait.Recv(t, answer, "the held call's answer"); text(t, resp) != "released" {
				t.Fatalf("answer %s %+v", resp.Result, resp.Error)
			}
		}
		quiet.returned.Store(true)
		plain.returned.Store(true)
		if got := quiet.events(); len(got) != 0 {
			t.Errorf("quiet stream %v, want nothing: the call sent nothing", got)
		}
		if got := plain.events(); !slices.Equal(got, []string{"hold"}) {
			t.Errorf("plain stream %v, want its hold", got)
		}
	})
}
