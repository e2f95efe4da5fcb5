package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The intercept scenario: the small tools/call and the 1 MiB result
// through two gateways in front of one upstream, one without interceptors
// and one with a redact of 10 patterns on results, alternating. What it
// shows is what judging every result costs: the walk over the result's
// members and each pattern run over each string, when nothing matches
// (the common case; a match adds one in-place edit).

// interceptPatterns are the scenario's 10 redact patterns. They are plain
// patterns, not named detectors: a detector's prefilter (a needle such as
// "AKIA") skips its expression on text that cannot match, a plain
// pattern runs over every string, so this is the dearer case of 10.
func interceptPatterns() []string {
	return []string{
		`AKIA[0-9A-Z]{16}`,
		`(?i)aws_secret_access_key\s*[:=]\s*[A-Za-z0-9/+=]{40}`,
		`gh[pousr]_[A-Za-z0-9]{36}`,
		`xox[abposr]-[A-Za-z0-9-]{10,}`,
		`sk-[A-Za-z0-9]{32,}`,
		`-----BEGIN [A-Z ]*PRIVATE KEY-----`,
		`eyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{10,}`,
		`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+\.[A-Za-z]{2,}`,
		`\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b`,
		`(?i)password\s*[:=]\s*\S+`,
	}
}

// interceptSection is the redact gateway's interceptors: section.
func interceptSection() string {
	var sb strings.Builder
	sb.WriteString("interceptors:\n  - name: redact-10\n    type: redact\n    phase: result\n    patterns:\n")
	for _, p := range interceptPatterns() {
		fmt.Fprintf(&sb, "      - %q\n", p)
	}
	return sb.String()
}

// interceptCalls is the intercept scenario: rows "mcpgw" (no
// interceptors) and "mcpgw-redact" at each concurrency with the small
// call, then the big tool's result through both, over legacy sessions.
func (b *bench) interceptCalls(ctx context.Context) error {
	up, err := b.start("upstream", roleUpstream, "-big", fmt.Sprint(b.o.bigBytes))
	if err != nil {
		return err
	}
	b.upstream = up
	base := fmt.Sprintf("listen: 127.0.0.1:0\nupstreams:\n  up:\n    url: %s/mcp\nroutes:\n  - path: /mcp\n", up.mcpURL)
	plainCfg, err := b.writeConfig("plain.yaml", base)
	if err != nil {
		return err
	}
	redactCfg, err := b.writeConfig("redact.yaml", base+interceptSection())
	if err != nil {
		return err
	}
	plain, err := b.start("mcpgw", roleGateway, "-config", plainCfg)
	if err != nil {
		return err
	}
	redact, err := b.start("mcpgw-redact", roleGateway, "-config", redactCfg)
	if err != nil {
		return err
	}
	eps := []endpoint{
		{name: "mcpgw", url: plain.mcpURL + "/mcp", tool: "up__echo", middle: plain},
		{name: "mcpgw-redact", url: redact.mcpURL + "/mcp", tool: "up__echo", middle: redact},
	}
	sessions, err := b.pairSessions(ctx, eps) // pair.go
	if err != nil {
		return err
	}

	fmt.Fprintf(b.out, "\n## tools/call (small echo) with a redact of %d patterns on results, %d × %s per row, alternating (at c=1 the rows' calls interleaved)\n\n", len(interceptPatterns()), b.o.reps, b.o.dur)
	fmt.Fprintln(b.out, "| c | target | calls/s | p50 | p99 | added p50 vs mcpgw | CPU/call | ÷ mcpgw: CPU/call | errors |")
	fmt.Fprintln(b.out, "|--:|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range b.o.conc {
		mk := func(ep endpoint, dur time.Duration) load {
			return load{conc: c, tool: ep.tool, args: `{"text":"hello"}`, want: []byte(`hello`), dur: dur, sessions: sessions[ep.name]}
		}
		rows, err := b.pairCell(ctx, "intercept", c, eps, mk) // pair.go
		if err != nil {
			return err
		}
		b.interceptRows(fmt.Sprint(c), eps, rows)
	}

	// The big result: calls at c=1, the rows' calls interleaved, as in the
	// big scenario.
	serial := max(b.o.bigCalls/10, 5)
	fmt.Fprintf(b.out, "\n## a %s tool result with a redact of %d patterns on results: %d calls at c=1 × %d reps, the rows' calls interleaved\n\n", mib(int64(b.o.bigBytes)), len(interceptPatterns()), serial, b.o.reps)
	fmt.Fprintln(b.out, "| c | target | calls/s | p50 | p99 | added p50 vs mcpgw | CPU/call | ÷ mcpgw: CPU/call | errors |")
	fmt.Fprintln(b.out, "|--:|---|--:|--:|--:|--:|--:|--:|--:|")
	want := []byte("xxxxxxxxxxxxxxxx")
	mkBig := func(ep endpoint, calls int) load {
		return load{conc: 1, tool: "up__big", args: `{}`, want: want, calls: calls, sessions: sessions[ep.name]}
	}
	for _, ep := range eps { // warm-up
		var st stats
		if err := b.runOnce(ctx, ep, mkBig(ep, 3), &st, ""); err != nil {
			return err
		}
		if st.errs > 0 {
			return fmt.Errorf("intercept big via %s: %s", ep.name, st.errMsg)
		}
	}
	rows := make([]stats, len(eps))
	loads := []load{mkBig(eps[0], serial), mkBig(eps[1], serial)}
	for range b.o.reps {
		if err := b.interleaved(ctx, eps, loads, 0, rows, ""); err != nil {
			return err
		}
	}
	b.interceptRows("1", eps, rows)
	return nil
}

// interceptRows prints one table row per endpoint, the first the
// baseline the others are compared with.
func (b *bench) interceptRows(c string, eps []endpoint, rows []stats) {
	var baseP50 time.Duration
	var baseLat []time.Duration
	for i, ep := range eps {
		st := &rows[i]
		lat := sortDurations(st.lat)
		added, ratio := "—", "—"
		if i == 0 {
			baseP50, baseLat = pct(lat, 50), lat
		} else {
			added = addedDur(pct(lat, 50)-baseP50, addedHalfWidth(lat, baseLat))
			ratio = pairRatio(st, &rows[0])
		}
		tput := 0.0
		if st.wall > 0 {
			tput = float64(st.calls) / st.wall.Seconds()
		}
		fmt.Fprintf(b.out, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %d |\n",
			c, ep.name, tput, fmtDur(pct(lat, 50)), fmtDur(pct(lat, 99)), added, st.perCall(st.cpu), ratio, st.errs)
	}
}
