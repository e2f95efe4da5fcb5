package client

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestReadStderrLine(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		want     []string // kept part of each line
		wantN    []int64  // stream bytes each took
		wantFull []int64  // full length of each line
	}{
		{"short lines", "a\nbc\n", 10, []string{"a", "bc"}, []int64{2, 3}, []int64{1, 2}},
		{"no final newline", "a\nbc", 10, []string{"a", "bc"}, []int64{2, 2}, []int64{1, 2}},
		{"clipped", "abcdefgh\nxy\n", 4, []string{"abcd", "xy"}, []int64{9, 3}, []int64{8, 2}},
		{"longer than the buffer", strings.Repeat("z", 10000) + "\nok\n", 5, []string{"zzzzz", "ok"}, []int64{10001, 3}, []int64{10000, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
			for i := range tc.want {
				line, n, full, err := readStderrLine(br, tc.max)
				if string(line) != tc.want[i] || n != tc.wantN[i] || full != tc.wantFull[i] {
					t.Errorf("line %d = %q (%d bytes of stream, %d long), want %q (%d, %d)", i, line, n, full, tc.want[i], tc.wantN[i], tc.wantFull[i])
				}
				if err != nil && i < len(tc.want)-1 {
					t.Fatalf("line %d: %v", i, err)
				}
			}
		})
	}
}

func TestClipUTF8(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"},  // é is 2 bytes: not cut in half
		{"a€b", 3, "a"}, // € is 3 bytes
		{"a€b", 4, "a€"},
	}
	for _, tc := range tests {
		if got := string(clipUTF8([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("clipUTF8(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// fakeClock is a settable clock whose AfterFunc timers fire only when the
// test says so.
type fakeClock struct {
	now   time.Time
	fired []func()
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) AfterFunc(_ time.Duration, f func()) func() bool {
	c.fired = append(c.fired, f)
	return func() bool { return true }
}

// The rate limit with an injected clock: exactly the burst at once, then
// the rate; the drops are summed up in one warning naming the period.
func TestStderrLogRateAndSummary(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clk := &fakeClock{now: time.Unix(1000, 0)}
	l := NewStderrLog(StderrOptions{Logger: zap.New(core), Rate: 2, Burst: 3, Setting: "upstreams.x.stderr", Now: clk.Now, AfterFunc: clk.AfterFunc})
	count := func() (lines, summaries int) {
		for _, e := range logs.All() {
			switch {
			case e.Message == "child stderr":
				lines++
			case strings.Contains(e.Message, "dropped"):
				summaries++
			}
		}
		return
	}
	for range 10 {
		l.Line("x", 0, false)
	}
	if lines, _ := count(); lines != 3 {
		t.Fatalf("logged %d lines at one instant, want the burst, 3", lines)
	}
	if len(clk.fired) != 1 {
		t.Fatalf("%d summary timers, want 1 (set at the first drop)", len(clk.fired))
	}
	clk.now = clk.now.Add(time.Second) // 2 more tokens
	for range 5 {
		l.Line("y", 0, false)
	}
	if lines, _ := count(); lines != 5 {
		t.Fatalf("logged %d lines after a second, want 3 + rate 2", lines)
	}
	clk.now = clk.now.Add(9 * time.Second)
	clk.fired[0]()
	var summary *observer.LoggedEntry
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "dropped") {
			summary = &e
		}
	}
	if summary == nil || summary.Message != "10 stderr lines dropped in the last 10s" || summary.Level != zapcore.WarnLevel ||
		!strings.Contains(summary.ContextMap()["fix"].(string), "upstreams.x.stderr.rate") {
		t.Fatalf("summary = %+v, want a warning: 10 stderr lines dropped in the last 10s, naming the setting", summary)
	}
	l.Close()
	if _, summaries := count(); summaries != 1 {
		t.Errorf("%d summaries, want 1 (nothing dropped since)", summaries)
	}
}

// Lines below the logger's level spend no tokens; probe lines are at debug.
func TestStderrLogLevels(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := NewStderrLog(StderrOptions{Logger: zap.New(core), Level: zapcore.DebugLevel, Burst: 1, Rate: 0.001})
	for range 5 {
		l.Line("quiet", 0, false)
	}
	info := NewStderrLog(StderrOptions{Logger: zap.New(core), Level: zapcore.InfoLevel, Burst: 1, Rate: 0.001})
	info.Line("probe noise", 0, true)
	info.Line("real", 0, false)
	if got := logs.All(); len(got) != 1 || got[0].ContextMap()["line"] != "real" {
		t.Errorf("logged %v, want only the info line (debug lines hidden, spending no token)", got)
	}
}
