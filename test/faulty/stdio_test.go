package faulty

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// stdioPeer drives ServeStdio through pipes, as a gateway would.
type stdioPeer struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan []byte
	done   chan error
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func startStdio(t *testing.T, opts Options) (*stdioPeer, *Server) {
	t.Helper()
	p := &stdioPeer{t: t, lines: make(chan []byte, 1024), done: make(chan error, 1), stderr: &syncBuffer{}}
	if opts.Stderr == nil {
		opts.Stderr = p.stderr
	}
	srv := NewServer(opts)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p.in = inW
	go func() {
		p.done <- srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	go func() {
		br := bufio.NewReaderSize(outR, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				p.lines <- bytes.TrimSuffix(line, []byte("\n"))
			}
			if err != nil {
				close(p.lines)
				return
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-p.done:
		case <-time.After(testwait.Long): // a bound on the event, far above its time
			t.Error("ServeStdio did not return after stdin closed")
		}
		inR.Close()
	})
	return p, srv
}

func (p *stdioPeer) send(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, s+"\n"); err != nil {
		p.t.Fatalf("write: %v", err)
	}
}

func (p *stdioPeer) call(id int, f Fault, progress string) {
	p.t.Helper()
	b, _ := jsonrpc.Encode(jsonrpc.NewRequest(jsonrpc.IntID(int64(id)), "tools/call", f.CallParams("", progress)))
	p.send(string(b))
}

// until reads lines until the response with id, returning the lines before it
// and the response.
func (p *stdioPeer) until(id string, d time.Duration) (before [][]byte, resp *jsonrpc.Message) {
	p.t.Helper()
	deadline := time.After(max(d, testwait.Long)) // a bound far above any scheduling delay
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("stdout closed before the answer to %s; read %q", id, before)
			}
			if m, err := jsonrpc.Parse(line); err == nil && m.Kind() == jsonrpc.KindResponse && string(m.ID) == id {
				return before, m
			}
			before = append(before, line)
		case <-deadline:
			p.t.Fatalf("no answer to %s within %s; read %q", id, d, before)
		}
	}
}

// quiet asserts nothing but the lines allowed arrive for d.
func (p *stdioPeer) quiet(d time.Duration) {
	p.t.Helper()
	select {
	case line := <-p.lines:
		p.t.Fatalf("unexpected line %q", line)
	case <-time.After(d): // a negative check: a wait cut short only misses a failure
	}
}

func tokenOf(t *testing.T, m *jsonrpc.Message) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error answer: %+v", m.Error)
	}
	tok, err := ResultToken(m.Result)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Each fault that answers does so with the call's token, after what it
// was scripted to send first.
func TestStdioAnsweringFaults(t *testing.T) {
	tests := []struct {
		name     string
		fault    Fault
		progress string
		check    func(t *testing.T, before [][]byte, resp *jsonrpc.Message, p *stdioPeer)
	}{
		{"echo", Fault{Kind: Echo, Token: "t-echo"}, "", func(t *testing.T, before [][]byte, _ *jsonrpc.Message, _ *stdioPeer) {
			if len(before) != 0 {
				t.Errorf("lines before the answer: %q", before)
			}
		}},
		{"slow with progress", Fault{Kind: Slow, Token: "t-slow", Delay: 60 * time.Millisecond, Events: 3}, "p1", func(t *testing.T, before [][]byte, _ *jsonrpc.Message, _ *stdioPeer) {
			if len(before) != 3 {
				t.Fatalf("got %d lines before the answer, want 3 progress notifications: %q", len(before), before)
			}
			for _, l := range before {
				if !bytes.Contains(l, []byte(`"notifications/progress"`)) || !bytes.Contains(l, []byte(`"progressToken":"p1"`)) {
					t.Errorf("not a progress notification for p1: %s", l)
				}
			}
		}},
		{"garbage", Fault{Kind: Garbage, Token: "t-garbage", Bytes: 300}, "", func(t *testing.T, before [][]byte, _ *jsonrpc.Message, _ *stdioPeer) {
			if len(before) != 4 {
				t.Fatalf("got %d garbage lines, want 4: %q", len(before), before)
			}
			if len(before[0]) != 300 || json.Valid(before[0]) {
				t.Errorf("first garbage line: %d bytes, valid JSON %v; want 300 bytes of non-JSON", len(before[0]), json.Valid(before[0]))
			}
			for _, l := range before[1:3] {
				if json.Valid(l) {
					t.Errorf("garbage line %q is valid JSON", l)
				}
			}
			if !bytes.Contains(before[3], []byte("faulty-stray-response")) {
				t.Errorf("last garbage line is not the stray response: %s", before[3])
			}
		}},
		{"huge", Fault{Kind: Huge, Token: "t-huge", Bytes: 2 << 20}, "", func(t *testing.T, _ [][]byte, resp *jsonrpc.Message, _ *stdioPeer) {
			if len(resp.Result) < 2<<20 {
				t.Errorf("result is %d bytes, want more than %d", len(resp.Result), 2<<20)
			}
		}},
		{"stderr", Fault{Kind: Stderr, Token: "t-stderr", Bytes: 100000}, "", func(t *testing.T, _ [][]byte, _ *jsonrpc.Message, p *stdioPeer) {
			if n := p.stderr.Len(); n != 100000 {
				t.Errorf("stderr got %d bytes, want 100000", n)
			}
		}},
		{"drop without a progress token", Fault{Kind: Drop, Token: "t-drop", Events: 2}, "", func(t *testing.T, before [][]byte, _ *jsonrpc.Message, _ *stdioPeer) {
			if len(before) != 2 || !bytes.Contains(before[0], []byte(`"notifications/message"`)) {
				t.Errorf("want 2 log notifications before the answer, got %q", before)
			}
		}},
		{"list_changed", Fault{Kind: ListChanged, Token: "t-lc"}, "", func(t *testing.T, before [][]byte, _ *jsonrpc.Message, p *stdioPeer) {
			if len(before) != 1 || !bytes.Contains(before[0], []byte(`"notifications/tools/list_changed"`)) {
				t.Fatalf("want the list_changed notification before the answer, got %q", before)
			}
			p.send(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
			_, list := p.until(`"l"`, 5*time.Second)
			if !bytes.Contains(list.Result, []byte(`"gen_1"`)) {
				t.Errorf("tools/list after list_changed lacks gen_1: %s", list.Result)
			}
			p.send(`{"jsonrpc":"2.0","id":"g","method":"tools/call","params":{"name":"gen_1","arguments":{"token":"t-gen"}}}`)
			if _, r := p.until(`"g"`, 5*time.Second); tokenOf(t, r) != "t-gen" {
				t.Errorf("gen_1 answered %s", r.Result)
			}
		}},
		{"grandchild", Fault{Kind: Grandchild, Token: "t-gc"}, "", func(t *testing.T, _ [][]byte, resp *jsonrpc.Message, _ *stdioPeer) {
			if !bytes.Contains(resp.Result, []byte("pid 4242")) {
				t.Errorf("answer lacks the grandchild's pid: %s", resp.Result)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := startStdio(t, Options{Grandchild: func() (int, error) { return 4242, nil }})
			p.call(7, tt.fault, tt.progress)
			before, resp := p.until("7", 10*time.Second)
			if got := tokenOf(t, resp); got != tt.fault.Token {
				t.Errorf("token %q, want %q", got, tt.fault.Token)
			}
			tt.check(t, before, resp, p)
		})
	}
}

// A hung call never answers, even when cancelled, and does not stop the
// connection; a cancelled slow call is not answered either.
func TestStdioHangAndCancel(t *testing.T) {
	p, srv := startStdio(t, Options{})
	p.call(1, Fault{Kind: Hang, Token: "h"}, "")
	p.call(2, Fault{Kind: Slow, Token: "s", Delay: 5 * time.Second, Events: 1}, "")
	testwait.Until(t, "the slow call to be served", func() bool { return srv.Served(Slow) != 0 })
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if before, _ := p.until("3", 5*time.Second); len(before) != 0 {
		t.Errorf("lines before the ping's answer: %q", before)
	}
	p.quiet(300 * time.Millisecond)
}

// crash, and reset and expire (which stdio cannot do otherwise), end the
// server mid-call: ServeStdio returns the crash error, nothing is answered.
func TestStdioCrash(t *testing.T) {
	for _, k := range []Kind{Crash, Reset, Expire} {
		t.Run(string(k), func(t *testing.T) {
			p, _ := startStdio(t, Options{})
			p.call(1, Fault{Kind: Slow, Token: "s", Delay: 50 * time.Millisecond}, "")
			p.call(2, Fault{Kind: k, Token: "c", Delay: 10 * time.Millisecond}, "")
			select {
			case err := <-p.done:
				if !ErrCrash(err) {
					t.Fatalf("ServeStdio returned %v, want the crash error", err)
				}
				p.done <- err // for the cleanup
			case <-time.After(testwait.Long): // a bound on the event, far above its time
				t.Fatal("no crash")
			}
			for line := range p.lines {
				t.Errorf("written after the crash: %s", line)
			}
		})
	}
}

// What is not a fault is answered as a well-behaved server would.
func TestStdioProtocol(t *testing.T) {
	tests := []struct {
		name, req, want string
	}{
		{"initialize picks the client's version", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{}}}`, `"protocolVersion":"2025-03-26"`},
		{"initialize offers its newest otherwise", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`, `"protocolVersion":"2025-11-25"`},
		{"tools/list names every kind", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `"name":"grandchild"`},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, `"code":-32601`},
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, `unknown tool \"nope\"`},
		{"bad arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"delay_ms":-1}}}`, `delay_ms -1 is outside`},
		{"state resource", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"faulty://state"}}`, `generation`},
		{"parse error", `{"jsonrpc":`, `"id":null,"error":{"code":-32700`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := startStdio(t, Options{})
			p.send(tt.req)
			select {
			case line := <-p.lines:
				if !strings.Contains(string(line), tt.want) {
					t.Errorf("answer %s lacks %s", line, tt.want)
				}
			case <-time.After(testwait.Long): // a bound on the event, far above its time
				t.Fatal("no answer")
			}
		})
	}
}

func TestFaultArgumentsRoundTrip(t *testing.T) {
	f := Fault{Kind: Drop, Token: "tok", Delay: 1500 * time.Millisecond, Bytes: 3, Events: 4, NoResume: true}
	got, name, err := parseCall(f.CallParams("", ""))
	if err != nil || name != "drop" || got != f {
		t.Errorf("parseCall(CallParams) = %+v %q %v, want %+v", got, name, err, f)
	}
	if p := string(f.CallParams("up__", "pt")); !strings.Contains(p, `"name":"up__drop"`) || !strings.Contains(p, `"progressToken":"pt"`) {
		t.Errorf("CallParams with prefix and progress token: %s", p)
	}
}
