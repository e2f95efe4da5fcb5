package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/test/faulty"
)

func TestMetricValue(t *testing.T) {
	exp := []byte("# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_goroutines_total{x=\"1\"} 7\nprocess_resident_memory_bytes 1.2345e+07\n")
	tests := []struct {
		name string
		want float64
		ok   bool
	}{
		{"go_goroutines", 42, true},
		{"process_resident_memory_bytes", 12345000, true},
		{"go_threads", 0, false},
	}
	for _, tt := range tests {
		got, ok := metricValue(exp, tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("metricValue(%s) = %v %v, want %v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseProc(t *testing.T) {
	rss, err := parseRSS([]byte("Name:\tmcpgw\nVmPeak:\t  9999 kB\nVmRSS:\t   2048 kB\n"))
	if err != nil || rss != 2048<<10 {
		t.Errorf("parseRSS = %d %v, want %d", rss, err, 2048<<10)
	}
	if _, err := parseRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("parseRSS without VmRSS: no error")
	}
	ppid, state := parseStat([]byte("1234 (odd (name) here) Z 77 1234 1234 0 -1"))
	if ppid != 77 || state != "Z" {
		t.Errorf("parseStat = %d %q, want 77 Z", ppid, state)
	}
}

// The generated configs are valid (and the broken one is not), every
// generation: what the reloads send must be what the soak means.
func TestConfigGenerations(t *testing.T) {
	for gen := range 8 {
		for _, broken := range []bool{false, true} {
			cg := configGen{mcpgw: "/bin/mcpgw", faulty: "/bin/faulty", httpURL: "http://127.0.0.1:9/mcp", gen: gen, httpTimeout: 3 + gen%2, broken: broken}
			cfg, err := config.Parse(fmt.Sprintf("gen %d", gen), []byte(cg.yaml()), func(string) (string, bool) { return "", false })
			if broken {
				if err == nil || !strings.Contains(err.Error(), "no_such_key") {
					t.Errorf("gen %d broken: err %v, want the unknown key named", gen, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("gen %d: %v\n%s", gen, err, cg.yaml())
			}
			_, hasExtra := cfg.Upstreams[upExtra]
			if hasExtra != (gen%4 < 2) {
				t.Errorf("gen %d: extra present %v", gen, hasExtra)
			}
			if !cfg.Upstreams[upState].Stateful || cfg.Upstreams[upHTTP].URL == "" || len(cfg.Routes) != 2 {
				t.Errorf("gen %d: upstreams or routes not as meant: %+v", gen, cfg)
			}
		}
	}
}

// record sorts every reply into exactly one outcome.
func TestRecord(t *testing.T) {
	ok := func(id string) *jsonrpc.Message {
		return jsonrpc.NewResult(jsonrpc.ID(id), json.RawMessage(`{"content":[{"type":"text","text":"tok"}]}`))
	}
	fail := jsonrpc.NewError(jsonrpc.ID("1"), jsonrpc.Errorf(-32001, "timeout"))
	tests := []struct {
		name  string
		c     *call
		rep   *reply
		check func(st *stats) string
	}{
		{"answered", &call{label: "x", check: textIs("tok")}, &reply{accepted: true, answers: 1, resp: ok("1")},
			func(st *stats) string { return pick(st.accepted == 1 && st.answered == 1 && st.byLabel["x"].ok == 1) }},
		{"another request's answer is crossed", &call{label: "x", check: textIs("mine")}, &reply{accepted: true, answers: 1, resp: ok("1")},
			func(st *stats) string { return pick(st.crossed == 1 && st.badAnswers == 0) }},
		{"a second answer is a duplicate", &call{label: "x"}, &reply{accepted: true, answers: 2, resp: ok("1")},
			func(st *stats) string { return pick(st.duplicates == 1 && st.answered == 1) }},
		{"accepted, no answer", &call{label: "x"}, &reply{accepted: true},
			func(st *stats) string { return pick(st.unanswered == 1 && st.answered == 0) }},
		{"cancelled, no answer: allowed", &call{label: "x"}, &reply{accepted: true, cancelled: true},
			func(st *stats) string {
				return pick(st.unanswered == 0 && st.cancelled == 1 && st.cancelledAnswered == 0)
			}},
		{"refused at the HTTP level", &call{label: "x"}, &reply{status: 503},
			func(st *stats) string { return pick(st.accepted == 0 && st.refused["HTTP 503"] == 1) }},
		{"abandoned stateless call", &call{label: "x"}, &reply{accepted: true, abandoned: true},
			func(st *stats) string { return pick(st.accepted == 0 && st.abandoned == 1) }},
		{"a well-behaved call's error", &call{label: "x", wellBehaved: true}, &reply{accepted: true, answers: 1, resp: fail},
			func(st *stats) string { return pick(st.wellBehavedErrors == 1 && st.errCodes[-32001] == 1) }},
		{"a faulty call's error is fine", &call{label: "x"}, &reply{accepted: true, answers: 1, resp: fail},
			func(st *stats) string { return pick(st.wellBehavedErrors == 0 && st.byLabel["x"].errs == 1) }},
		{"crossed messages on the stream", &call{label: "x"}, &reply{accepted: true, answers: 1, resp: ok("1"), crossed: []string{"a", "b"}},
			func(st *stats) string { return pick(st.crossed == 2) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStats()
			st.record("rev", tt.c, tt.rep)
			if msg := tt.check(st); msg != "" {
				t.Errorf("%+v", st)
			}
		})
	}
}

func pick(ok bool) string {
	if ok {
		return ""
	}
	return "unexpected accounting"
}

// The verdict fails on every broken invariant, and only then.
func TestVerdict(t *testing.T) {
	base := measure{goroutines: 50, rss: 30 << 20}
	b := bounds{goroutines: 40, rssBytes: 96 << 20}
	good := func() *stats {
		st := newStats()
		st.accepted, st.answered = 10, 10
		return st
	}
	tests := []struct {
		name string
		mod  func(st *stats, end *measure)
		want string // "" = pass
	}{
		{"pass", func(*stats, *measure) {}, ""},
		{"unanswered", func(st *stats, _ *measure) { st.answered, st.unanswered = 9, 1 }, "1 unanswered"},
		{"cancelled unanswered is allowed", func(st *stats, _ *measure) { st.answered, st.cancelled = 9, 1 }, ""},
		{"crossed", func(st *stats, _ *measure) { st.crossed = 1 }, "1 crossed"},
		{"duplicates", func(st *stats, _ *measure) { st.duplicates = 2 }, "2 duplicate"},
		{"goroutines", func(_ *stats, end *measure) { end.goroutines = 91 }, "goroutines grew by 41"},
		{"rss", func(_ *stats, end *measure) { end.rss = 127<<20 + 1 }, "RSS grew"},
		{"nothing accepted", func(st *stats, _ *measure) { st.accepted, st.answered = 0, 0 }, "no request was accepted"},
		{"lost session", func(st *stats, _ *measure) { st.sessionsLost = 1 }, "1 sessions lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, end := good(), base
			tt.mod(st, &end)
			v := st.verdict(base, end, b, nil)
			got := strings.Join(v, "; ")
			if (tt.want == "") != (len(v) == 0) || !strings.Contains(got, tt.want) {
				t.Errorf("verdict %q, want %q", got, tt.want)
			}
		})
	}
}

// The Streamable client catches what a broken gateway would do on a call's
// stream: another request's response, another call's progress, a second
// answer.
func TestStreamableClientCatchesCrossing(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, _ := jsonrpc.Parse(body)
		switch {
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"}}`)
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"someone-else\",\"progress\":1}}\n\n")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n\n")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", m.ID)
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", m.ID)
		}
	}))
	defer ts.Close()
	cl := &client{base: ts.URL, hc: ts.Client(), st: newStats()}
	s, err := cl.openStreamable(context.Background(), "/mcp", "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	rep := s.do(context.Background(), &call{label: "x", method: "tools/call", params: map[string]any{"name": "a"}, progress: "mine"})
	if rep.answers != 2 || len(rep.crossed) != 2 {
		t.Errorf("answers %d (want 2), crossed %q (want the foreign progress and response)", rep.answers, rep.crossed)
	}
}

// The legacy client catches a response to no request of its own and a
// second response to one it had.
func TestLegacyClientCatchesCrossing(t *testing.T) {
	msgs := make(chan string, 8)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: endpoint\ndata: /mcp/message?sessionId=x\n\n")
			w.(http.Flusher).Flush()
			for {
				select {
				case m := <-msgs:
					fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}
		body, _ := io.ReadAll(r.Body)
		m, _ := jsonrpc.Parse(body)
		w.WriteHeader(http.StatusAccepted)
		if m.ID == nil {
			return
		}
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"tok"}]}}`, m.ID)
		msgs <- answer
		if m.Method == "tools/call" {
			msgs <- answer                                        // a duplicate
			msgs <- `{"jsonrpc":"2.0","id":"nobody","result":{}}` // crossed
		}
	}))
	defer ts.Close()
	st := newStats()
	cl := &client{base: ts.URL, hc: ts.Client(), st: st}
	l, err := cl.openLegacy(context.Background(), "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	rep := l.do(context.Background(), &call{label: "x", method: "tools/call", params: map[string]any{"name": "a"}, check: textIs("tok")})
	if rep.answers < 1 || rep.resp == nil {
		t.Fatalf("no answer: %+v", rep)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st.mu.Lock()
		c, d := st.crossed, st.duplicates+rep.answers-1
		st.mu.Unlock()
		if c == 1 && d == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crossed %d, duplicates %d; want 1 and 1", c, d)
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
	l.close()
}

func TestOrphans(t *testing.T) {
	ps := []proc{{pid: 10, ppid: 1}, {pid: 11, ppid: 10, grandchild: true}, {pid: 12, ppid: 1, grandchild: true}, {pid: 13, ppid: 99}}
	got := orphans(ps)
	if len(got) != 1 || got[0].pid != 12 {
		t.Errorf("orphans = %+v, want only pid 12 (a grandchild whose parent is gone)", got)
	}
}

func TestParseFaults(t *testing.T) {
	all, err := parseFaults("all")
	if err != nil || len(all) != len(faulty.Kinds) || !all[faulty.Hang] {
		t.Errorf("all: %v %v", all, err)
	}
	some, err := parseFaults("hang, crash")
	if err != nil || !some[faulty.Hang] || !some[faulty.Crash] || !some[faulty.Echo] || some[faulty.Drop] {
		t.Errorf("hang, crash: %v %v", some, err)
	}
	most, err := parseFaults("all,-hang")
	if err != nil || most[faulty.Hang] || !most[faulty.Crash] || !most[faulty.Echo] {
		t.Errorf("all,-hang: %v %v", most, err)
	}
	if _, err := parseFaults("hang,explode"); err == nil || !strings.Contains(err.Error(), `"explode"`) {
		t.Errorf("unknown fault: %v", err)
	}
}

func TestGoroutineSummary(t *testing.T) {
	dump := "goroutine 1 [running]:\nmain.main()\n\t/x/main.go:1 +0x1\n\n" +
		"goroutine 7 [select]:\nnet/http.(*persistConn).readLoop(0xc0)\n\t/go/net/http/transport.go:1 +0x1\ncreated by net/http.(*Transport).dialConn in goroutine 5\n\t/go/x.go:2\n\n" +
		"goroutine 8 [select]:\nruntime.gopark(0x1)\n\t/go/r.go:1\nnet/http.(*persistConn).readLoop(0xc1)\n\t/go/net/http/transport.go:1 +0x1\ncreated by net/http.(*Transport).dialConn in goroutine 6\n\t/go/x.go:2\n"
	got := goroutineSummary([]byte(dump), 5)
	want := "      2  net/http.(*Transport).dialConn | net/http.(*persistConn).readLoop\n      1   | main.main\n"
	if got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}
