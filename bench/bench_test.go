package main

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/intercept"
	"github.com/mcpgw/mcpgw/internal/policy"
)

func TestParseStatCPU(t *testing.T) {
	// utime 250 and stime 50 ticks: 3 s; the command name holds a ") (".
	stat := "1234 (role) (x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 100 1000 10\n"
	for _, tc := range []struct {
		name, in string
		want     time.Duration
		err      bool
	}{
		{"ok", stat, 3 * time.Second, false},
		{"no name", "1234 S 1", 0, true},
		{"short", "1 (x) S 1 2", 0, true},
		{"not numbers", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 a b", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.in))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("parseStatCPU = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseStatusKB(t *testing.T) {
	status := []byte("Name:\tx\nVmHWM:\t  9000 kB\nVmRSS:\t  2048 kB\n")
	if got := parseStatusKB(status, "VmRSS:"); got != 2048 {
		t.Fatalf("VmRSS = %d, want 2048", got)
	}
	if got := parseStatusKB(status, "VmSwap:"); got != 0 {
		t.Fatalf("absent key = %d, want 0", got)
	}
}

func TestPct(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {90, 90}, {99, 99}, {100, 100}, {0, 1}} {
		if got := pct(d, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := pct(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v, want 0", got)
	}
}

func TestPayload(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"json", ` {"id":1}`, `{"id":1}`},
		{"sse", "event: message\nid: 3\ndata: {\"id\":1}\n\n", `{"id":1}`},
		{"sse, last event", "data: {\"method\":\"n\"}\n\ndata: {\"id\":2}\n\n", `{"id":2}`},
		{"empty", "", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(payload([]byte(tc.in))); got != tc.want {
				t.Fatalf("payload = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCallBody(t *testing.T) {
	got := string(callBody(nil, 7, "up__echo", `{"text":"hi"}`, false))
	if want := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"hi"}}}`; got != want {
		t.Fatalf("legacy body = %s, want %s", got, want)
	}
	got = string(callBody(nil, 8, "echo", `{}`, true))
	if !strings.Contains(got, `"arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"`) {
		t.Fatalf("stateless body lacks its _meta: %s", got)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
		conc []int
	}{
		{"defaults", nil, "", []int{1, 32, 256}},
		{"quick", []string{"-quick"}, "", []int{1, 32}},
		{"quick, explicit c wins", []string{"-quick", "-c", "8"}, "", []int{8}},
		{"intercept scenario", []string{"-scenarios", "intercept"}, "", []int{1, 32, 256}},
		{"unknown scenario", []string{"-scenarios", "call,nope"}, `unknown "nope"`, nil},
		{"bad c", []string{"-c", "1,x"}, "not a positive integer", nil},
		{"argument", []string{"call"}, "unexpected argument", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(o.conc) != len(tc.conc) || o.conc[0] != tc.conc[0] {
				t.Fatalf("conc = %v, want %v", o.conc, tc.conc)
			}
		})
	}
}

// The auth scenario's policy is valid and decides as the scenario needs:
// its principal's call allowed by the one rule meant for it, others not.
func TestBenchPolicy(t *testing.T) {
	src := "upstreams: {st: {url: 'https://up.example.com'}}\nauth: {api_keys: [{name: k, key: s}]}\n" + scenarioPolicy()
	cfg, err := config.Parse("bench.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(cfg.Policy)
	if err != nil {
		t.Fatal(err)
	}
	alice := policy.Principal{Subject: "alice", Groups: []string{"team500", "team7"}, Claims: map[string]any{"tenant": "acme"}}
	for _, tc := range []struct {
		p       policy.Principal
		name    string
		allowed bool
		rule    int
	}{
		{alice, "st__echo", true, 500},
		{alice, "st__admin_x", false, 500},
		{policy.Principal{Subject: "bob", Groups: []string{"team7"}}, "st__echo", false, -1},
	} {
		d := pol.DecideCall(tc.p, "/mcp", policy.KindTool, tc.name, []byte(`{"text":"hello"}`))
		if d.Allowed != tc.allowed || d.Rule != tc.rule {
			t.Errorf("%s calling %s: %+v, want allowed %v by rule %d", tc.p.Subject, tc.name, d, tc.allowed, tc.rule)
		}
	}
}

// An added time keeps its sign: a middle that queues less than the
// upstream itself answers sooner than direct at high concurrency.
func TestSignedDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2020 * time.Microsecond:   "+2.02 ms",
		-15161 * time.Microsecond: "−15.2 ms",
		0:                         "+0 µs",
		-300 * time.Microsecond:   "−300 µs",
	} {
		if got := signedDur(d); got != want {
			t.Errorf("signedDur(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestMedianHalfWidth: the interval is the order statistics around the
// middle, and covers the true median about 95 % of the time.
func TestMedianHalfWidth(t *testing.T) {
	uniform := make([]time.Duration, 10000)
	for i := range uniform {
		uniform[i] = time.Duration(i+1) * time.Microsecond
	}
	// n/2 ∓ 0.98·√n = 5000 ∓ 98: samples 4902 and 5098 (1-based 4903, 5099).
	if got := medianHalfWidth(uniform); got != 98*time.Microsecond {
		t.Errorf("uniform 1..10000 µs: ±%v, want ±98µs", got)
	}
	if got := medianHalfWidth(uniform[:10]); got != 0 {
		t.Errorf("10 samples: ±%v, want 0 (too few to say)", got)
	}
	// Exponential latencies (median ln 2 ms): of 400 intervals from 1,000
	// samples each, about 380 cover the median.
	rng := rand.New(rand.NewPCG(1, 2))
	ln2 := math.Ln2
	truth := time.Duration(ln2 * float64(time.Millisecond))
	covered := 0
	for range 400 {
		s := make([]time.Duration, 1000)
		for i := range s {
			s[i] = time.Duration(rng.ExpFloat64() * float64(time.Millisecond))
		}
		s = sortDurations(s)
		if m, h := pct(s, 50), medianHalfWidth(s); m-h <= truth && truth <= m+h {
			covered++
		}
	}
	if covered < 360 || covered > 396 {
		t.Errorf("%d of 400 intervals cover the median, want about 380", covered)
	}
	if got := addedDur(261*time.Microsecond, 32*time.Microsecond); got != "+261 µs ±32 µs" {
		t.Errorf("addedDur = %q", got)
	}
}

// TestPairedAdded: each row's calls less the first row's call of the
// same round, sorted; nil when the rows do not pair up.
func TestPairedAdded(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	rows := []stats{{lat: ms(10, 20, 30)}, {lat: ms(13, 21, 35)}, {lat: ms(9, 20, 30)}}
	got := pairedAdded(rows)
	if want := ms(1, 3, 5); !slices.Equal(got[1], want) {
		t.Errorf("row 1: %v, want %v", got[1], want)
	}
	if want := ms(-1, 0, 0); !slices.Equal(got[2], want) {
		t.Errorf("row 2: %v, want %v", got[2], want)
	}
	if got[0] != nil {
		t.Errorf("row 0 (the base): %v, want nil", got[0])
	}
	if pairedAdded([]stats{{lat: ms(1, 2)}, {lat: ms(1)}}) != nil {
		t.Error("rows of different lengths paired")
	}
	if pairedAdded([]stats{{lat: ms(1, 2)}, {lat: ms(1, 2), errs: 1}}) != nil {
		t.Error("a row with an error (a call missing from its round) paired")
	}
}

func TestRunRatios(t *testing.T) {
	run := func(calls int, wallMs, cpuMs int) runStat {
		return runStat{calls: calls, wall: time.Duration(wallMs) * time.Millisecond, cpu: time.Duration(cpuMs) * time.Millisecond}
	}
	// Three repetitions; the host slowed in the second, for both rows.
	f := &stats{runs: []runStat{run(1000, 1000, 200), run(500, 1000, 400), run(1000, 1000, 200)}}
	m := &stats{runs: []runStat{run(1100, 1000, 190), run(520, 1000, 420), run(900, 1000, 210)}}
	// calls/s ratios 1.10, 1.04, 0.90; CPU ratios 0.95/1.10=0.8636…, 1.05/0.808=1.0096…, 1.05/0.90=1.1667
	want := "calls/s 1.04× (0.90–1.10), CPU 1.01× (0.86–1.17) (3 runs)"
	if got := runRatios(m, f); got != want {
		t.Fatalf("runRatios = %q, want %q", got, want)
	}
	// Two runs: the median is their mean.
	f2 := &stats{runs: f.runs[:2]}
	m2 := &stats{runs: m.runs[:2]}
	if got := runRatios(m2, f2); got != "calls/s 1.07× (1.04–1.10), CPU 0.94× (0.86–1.01) (2 runs)" {
		t.Fatalf("two runs: %q", got)
	}
	if got := runRatios(&stats{runs: m.runs[:1]}, f); got != "—" {
		t.Fatalf("one run: %q, want —", got)
	}
	// A run without calls (all failed) is left out, not divided by.
	m3 := &stats{runs: []runStat{run(0, 1000, 100), m.runs[1], m.runs[2]}}
	if got := runRatios(m3, f); got != "calls/s 0.97× (0.90–1.04), CPU 1.09× (1.01–1.17) (2 runs)" {
		t.Fatalf("a run without calls: %q", got)
	}
}

// The intercept scenario's redact gateway config is valid, has its 10
// patterns, leaves the results the scenario measures as they are (it
// measures judging, and its calls check the echoed text), and does
// redact a match of each pattern.
func TestBenchIntercept(t *testing.T) {
	src := "upstreams: {up: {url: 'http://127.0.0.1:1/mcp'}}\nroutes: [{path: /mcp}]\n" + interceptSection()
	cfg, err := config.Parse("bench.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Interceptors) != 1 || len(cfg.Interceptors[0].Patterns) != 10 {
		t.Fatalf("interceptors = %+v, want one redact of 10 patterns", cfg.Interceptors)
	}
	set, err := intercept.New(cfg.Interceptors, intercept.Options{})
	if err != nil {
		t.Fatal(err)
	}
	target := &intercept.Target{Route: "/mcp", Upstream: "up", Kind: "tool", Name: "up__echo", Method: "tools/call"}
	result := func(text string) []byte {
		return []byte(`{"content":[{"type":"text","text":"` + text + `"}]}`)
	}
	for _, text := range []string{"hello", strings.Repeat("x", 1<<16)} {
		if o := set.Result(context.Background(), target, result(text)); o.Changed || o.Denied {
			t.Errorf("%.20q…: %+v, want unchanged", text, o)
		}
	}
	for _, secret := range []string{
		"AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key=" + strings.Repeat("A", 40), "ghp_" + strings.Repeat("a", 36),
		"xoxb-1234567890ab", "sk-" + strings.Repeat("a", 32), "-----BEGIN RSA PRIVATE KEY-----",
		"eyJhbGciOi.eyJzdWIiOi.signature123", "a@example.com", "123-45-6789", "password: hunter2",
	} {
		o := set.Result(context.Background(), target, result("see "+secret+" here"))
		if !o.Changed || strings.Contains(string(o.Out), secret) {
			t.Errorf("%q: %s, want it redacted", secret, o.Out)
		}
	}
}
