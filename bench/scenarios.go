package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
)

// stats accumulates one row over the alternating repetitions.
type stats struct {
	lat     []time.Duration
	calls   int
	wall    time.Duration
	cpu     time.Duration
	gen     time.Duration // the load generator's own CPU (this process)
	mallocs uint64
	alloc   uint64
	rss     int64
	conns   int64 // new connections at the upstream (its listener's count)
	errs    int
	errMsg  string
	runs    []runStat // each measured run's own, for ratios taken run by run
}

// runStat is one run of one row: its calls, wall time and the middle
// process's CPU.
type runStat struct {
	calls     int
	wall, cpu time.Duration
}

func (s *stats) add(r result, before, after procSample) {
	s.addMiddle(r, before, after)
}

// addUpstream counts the connections the upstream accepted during a run.
func (s *stats) addUpstream(before, after procSample) { s.conns += after.conns - before.conns }

func (s *stats) addMiddle(r result, before, after procSample) {
	s.lat = append(s.lat, r.lat...)
	s.calls += len(r.lat)
	s.wall += r.wall
	s.cpu += after.cpu - before.cpu
	s.mallocs += after.mallocs - before.mallocs
	s.alloc += after.alloc - before.alloc
	s.rss = after.rss
	s.runs = append(s.runs, runStat{calls: len(r.lat), wall: r.wall, cpu: after.cpu - before.cpu})
	s.errs += r.errs
	if s.errMsg == "" {
		s.errMsg = r.errMsg
	}
}

func (s *stats) perCall(d time.Duration) string {
	if s.calls == 0 {
		return "—"
	}
	return fmtDur(d / time.Duration(s.calls))
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
}

// addedDur is an added p50 and its sampling uncertainty: "+261 µs ±32 µs".
func addedDur(d, pm time.Duration) string {
	if pm <= 0 {
		return signedDur(d)
	}
	return signedDur(d) + " ±" + fmtDur(pm)
}

// signedDur is an added time with its sign: "+2.02 ms", "−15.2 ms" (a
// middle can answer sooner than direct when it queues less).
func signedDur(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// runOnce measures one run of ep, sampling its middle process around it
// (and profiling it when asked).
func (b *bench) runOnce(ctx context.Context, ep endpoint, l load, st *stats, profile string) error {
	before, err := ep.middle.sample(false)
	if err != nil {
		return err
	}
	upBefore, err := b.upstream.sample(false)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	if profile != "" && ep.middle != nil {
		secs := max(int(l.dur.Seconds()), 1)
		wg.Go(func() { fetch(ep.middle.statsURL+fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), profile) })
	}
	gen0 := selfCPU()
	r := b.c.run(ctx, ep.url, l)
	st.gen += selfCPU() - gen0
	wg.Wait()
	after, err := ep.middle.sample(false)
	if err != nil {
		return err
	}
	upAfter, err := b.upstream.sample(false)
	if err != nil {
		return err
	}
	st.addMiddle(r, before, after)
	st.addUpstream(upBefore, upAfter)
	return ctx.Err()
}

// interleaved is one repetition of a c=1 measurement with the targets'
// calls taken in turn from one worker, for dur (or the loads' call
// count): at c=1 a block of seconds per target lets the host's drift land
// on one row and not the next (the same binary's added p50 moved by 90 µs
// between blocks this way), which calls in turn share. Each middle process is sampled around
// the whole run; the upstream's new connections, which the rows share,
// are counted on each row as the cell's.
func (b *bench) interleaved(ctx context.Context, eps []endpoint, loads []load, dur time.Duration, rows []stats, profName string) error {
	urls := make([]string, len(eps))
	before := make([]procSample, len(eps))
	for i, ep := range eps {
		urls[i] = ep.url
		var err error
		if before[i], err = ep.middle.sample(false); err != nil {
			return err
		}
	}
	upBefore, err := b.upstream.sample(false)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, ep := range eps {
		// The forwarder too: at c=1 the two rows' profiles side by side
		// say where mcpgw's extra time per call goes.
		if b.o.profileDir != "" && profName != "" && (ep.name == "mcpgw" || ep.name == "forwarder") {
			path := filepath.Join(b.o.profileDir, ep.name+"-cpu-"+profName+".pprof")
			secs := max(int(dur.Seconds()), 1)
			wg.Go(func() { fetch(ep.middle.statsURL+fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), path) })
		}
	}
	gen0 := selfCPU()
	res := b.c.runInterleaved(ctx, urls, loads, dur)
	gen := selfCPU() - gen0
	wg.Wait()
	total := 0
	for _, r := range res {
		total += len(r.lat)
	}
	upAfter, err := b.upstream.sample(false)
	if err != nil {
		return err
	}
	for i, ep := range eps {
		after, err := ep.middle.sample(false)
		if err != nil {
			return err
		}
		rows[i].addMiddle(res[i], before[i], after)
		rows[i].addUpstream(upBefore, upAfter)
		if total > 0 { // the one worker's CPU, shared by its calls
			rows[i].gen += gen * time.Duration(len(res[i].lat)) / time.Duration(total)
		}
	}
	return ctx.Err()
}

// fetch saves url's body to path (profiles; failures are reported, not fatal).
func fetch(url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// startEcho starts the echo upstream, the forwarder in front of it and
// mcpgw in front of it and of a stdio demo upstream; extra is appended to
// mcpgw's config.
func (b *bench) startEcho(extra string) (up, fwd, gw *child, err error) {
	if up, err = b.start("upstream", roleUpstream, "-big", fmt.Sprint(b.o.bigBytes)); err != nil {
		return
	}
	b.upstream = up
	if fwd, err = b.start("forwarder", roleForwarder, "-upstream", up.mcpURL); err != nil {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	cfg, err := b.writeConfig("echo.yaml", fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  up:
    url: %s/mcp
  st:
    url: %s/stateless
  demo:
    command: [%q, %q]
  raw:
    command: [%q, %q]
%sroutes:
  - path: /mcp
%s`, up.mcpURL, up.mcpURL, exe, roleDemo, exe, roleStdioEcho, b.sandboxedUpstream(exe), extra))
	if err != nil {
		return
	}
	gw, err = b.start("mcpgw", roleGateway, "-config", cfg)
	return
}

// sandboxedUpstream is the config of "sbx", the stdio echo child in a
// sandbox (no network, the binary's file only), when its row is asked for.
func (b *bench) sandboxedUpstream(exe string) string {
	if !slices.Contains(b.o.upstreams, "stdio-sandboxed") {
		return ""
	}
	return fmt.Sprintf("  sbx:\n    command: [%q, %q]\n    sandbox: {runtime: binary}\n", exe, roleStdioEcho)
}

// echoEndpoints are the rows of one upstream transport and mode: a legacy
// session goes to the go-sdk's stateful handler (upstream "up" of mcpgw),
// a 2026-07-28 request to its stateless one ("st"); the stdio upstreams
// (the go-sdk "demo", and "raw", the minimal echo child of stdioecho.go)
// have no direct or forwarder row.
func (b *bench) echoEndpoints(upstream, mode, tool string, up, fwd, gw *child) []endpoint {
	var eps []endpoint
	if upstream == "stdio" || upstream == "stdio-raw" || upstream == "stdio-sandboxed" {
		prefix := map[string]string{"stdio": "demo__", "stdio-raw": "raw__", "stdio-sandboxed": "sbx__"}[upstream]
		if b.want("mcpgw") {
			eps = append(eps, endpoint{name: "mcpgw", url: gw.mcpURL + "/mcp", tool: prefix + tool, middle: gw})
		}
		return eps
	}
	path, prefix := "/mcp", "up__"
	if mode == "stateless" {
		path, prefix = "/stateless", "st__"
	}
	if b.want("direct") {
		eps = append(eps, endpoint{name: "direct", url: up.mcpURL + path, tool: tool})
	}
	if b.want("forwarder") {
		eps = append(eps, endpoint{name: "forwarder", url: fwd.mcpURL + path, tool: tool, middle: fwd})
	}
	if b.want("mcpgw") {
		eps = append(eps, endpoint{name: "mcpgw", url: gw.mcpURL + "/mcp", tool: prefix + tool, middle: gw})
	}
	return eps
}

// calls is scenario 1: a small tools/call at each concurrency, session
// count and mode, each row alternating with the others.
func (b *bench) calls(ctx context.Context) error {
	up, fwd, gw, err := b.startEcho("")
	if err != nil {
		return err
	}
	maxSess := slices.Max(b.o.sessions)
	fmt.Fprintf(b.out, "\n## tools/call (small echo), %d × %s per row, alternating (at c=1 the rows' calls interleaved)\n\n", b.o.reps, b.o.dur)
	fmt.Fprintln(b.out, "| upstream | mode | c | sessions | target | calls/s | p50 | p90 | p99 | added p50 | CPU/call | allocs/call | RSS | new upstream conns | errors | load gen CPU/call | ÷ forwarder, run by run: calls/s, CPU/call |")
	fmt.Fprintln(b.out, "|---|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, upstream := range b.o.upstreams {
		for _, mode := range b.o.modes {
			eps := b.echoEndpoints(upstream, mode, "echo", up, fwd, gw)
			if len(eps) == 0 {
				continue
			}
			sessions := map[string][]string{}
			sessCounts := []int{0}
			if mode == "legacy" {
				sessCounts = b.o.sessions
				for _, ep := range eps {
					ids, err := b.openSessions(ctx, ep.url, maxSess, 16)
					if err != nil {
						return fmt.Errorf("%s: %w", ep.name, err)
					}
					sessions[ep.name] = ids
				}
			}
			for _, c := range b.o.conc {
				for _, nsess := range sessCounts {
					if err := b.callCell(ctx, upstream, mode, c, nsess, eps, sessions); err != nil {
						return err
					}
				}
			}
		}
	}
	if b.o.profileDir != "" && b.want("mcpgw") {
		fetch(gw.statsURL+"/debug/pprof/allocs", filepath.Join(b.o.profileDir, "mcpgw-allocs.pprof"))
	}
	return nil
}

func (b *bench) callCell(ctx context.Context, upstream, mode string, c, nsess int, eps []endpoint, sessions map[string][]string) error {
	rows := make([]stats, len(eps))
	mk := func(ep endpoint, dur time.Duration) load {
		l := load{conc: c, tool: ep.tool, args: `{"text":"hello"}`, want: []byte(`hello`), dur: dur, stateless: mode == "stateless"}
		if nsess > 0 {
			l.sessions = sessions[ep.name][:nsess]
		}
		return l
	}
	// Warm-up: connections to every worker count, caches, the GC's pace.
	// Long enough for several calls per worker (4 ms each), or the pools
	// are still growing to their steady size in the measured runs, and
	// that shows as new upstream connections.
	warm := min(b.o.dur, max(300*time.Millisecond, time.Duration(c)*4*time.Millisecond))
	for _, ep := range eps {
		var st stats
		if err := b.runOnce(ctx, ep, mk(ep, warm), &st, ""); err != nil {
			return err
		}
		if st.errs > 0 {
			return fmt.Errorf("%s %s c=%d via %s: warm-up failed: %s", upstream, mode, c, ep.name, st.errMsg)
		}
	}
	for rep := range b.o.reps {
		if c == 1 && len(eps) > 1 {
			// One worker: the targets' calls taken in turn (runInterleaved).
			loads := make([]load, len(eps))
			for i, ep := range eps {
				loads[i] = mk(ep, b.o.dur)
			}
			if err := b.interleaved(ctx, eps, loads, time.Duration(len(eps))*b.o.dur, rows, fmt.Sprintf("%s-%s-c%d-s%d-r%d", upstream, mode, c, nsess, rep)); err != nil {
				return err
			}
			continue
		}
		for k := range eps { // a different target first in each repetition
			i := (k + rep) % len(eps)
			prof := ""
			if b.o.profileDir != "" && eps[i].name == "mcpgw" {
				prof = filepath.Join(b.o.profileDir, fmt.Sprintf("mcpgw-cpu-%s-%s-c%d-s%d-r%d.pprof", upstream, mode, c, nsess, rep))
			}
			if err := b.runOnce(ctx, eps[i], mk(eps[i], b.o.dur), &rows[i], prof); err != nil {
				return err
			}
		}
	}
	var paired [][]time.Duration
	if c == 1 && len(eps) > 1 && eps[0].name == "direct" {
		paired = pairedAdded(rows) // the calls were taken in turn
	}
	var direct time.Duration
	var directLat []time.Duration
	sess := "—"
	if nsess > 0 {
		sess = fmt.Sprint(nsess)
	}
	fwd := slices.IndexFunc(eps, func(ep endpoint) bool { return ep.name == "forwarder" })
	for i, ep := range eps {
		st := &rows[i]
		lat := sortDurations(st.lat)
		p50 := pct(lat, 50)
		added, cpu, allocs, rss := "—", "—", "—", "—"
		vsFwd := "—"
		if fwd >= 0 && ep.name == "mcpgw" {
			vsFwd = runRatios(st, &rows[fwd])
		}
		if ep.name == "direct" {
			direct, directLat = p50, lat
		} else if direct > 0 {
			added = addedDur(p50-direct, addedHalfWidth(lat, directLat))
			if paired != nil {
				added += " (paired " + addedDur(pct(paired[i], 50), medianHalfWidth(paired[i])) + ")"
			}
		}
		if ep.middle != nil && st.calls > 0 {
			cpu = st.perCall(st.cpu)
			allocs = fmt.Sprint(st.mallocs / uint64(st.calls))
			rss = mib(st.rss)
		}
		tput := 0.0
		if st.wall > 0 {
			tput = float64(st.calls) / st.wall.Seconds()
		}
		errs := fmt.Sprint(st.errs)
		if st.errs > 0 {
			errs += " (" + strings.ReplaceAll(st.errMsg, "|", "/") + ")"
		}
		conns := "—"
		if upstream == "http" {
			conns = fmt.Sprint(st.conns)
		}
		fmt.Fprintf(b.out, "| %s | %s | %d | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			upstream, mode, c, sess, ep.name, tput, fmtDur(p50), fmtDur(pct(lat, 90)), fmtDur(pct(lat, 99)), added, cpu, allocs, rss, conns, errs, st.perCall(st.gen), vsFwd)
	}
	return nil
}

// openSessions opens n legacy sessions at url with conc workers.
func (b *bench) openSessions(ctx context.Context, url string, n, conc int) ([]string, error) {
	ids := make([]string, n)
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				id, err := b.c.openSession(ctx, url)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("session %d of %d: %w", i+1, n, err)
					}
					mu.Unlock()
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return ids, first
}

// list is scenario 2: tools/list paged through a merged catalog of
// listUps × listTools tools, on a fresh mcpgw (cold) and again (warm);
// the direct row lists every upstream one after another.
func (b *bench) list(ctx context.Context) error {
	up, err := b.start("list-upstream", roleUpstream, "-paths", fmt.Sprint(b.o.listUps), "-tools", fmt.Sprint(b.o.listTools))
	if err != nil {
		return err
	}
	total := b.o.listUps * b.o.listTools
	const warmRuns = 10
	fmt.Fprintf(b.out, "\n## tools/list fully paged: %d tools (%d upstreams × %d), legacy session\n\n", total, b.o.listUps, b.o.listTools)
	fmt.Fprintln(b.out, "| target | pass | tools | pages | p50 per full listing | min | CPU/listing | allocs/listing |")
	fmt.Fprintln(b.out, "|---|---|--:|--:|--:|--:|--:|--:|")
	if b.want("direct") {
		sids := make([]string, b.o.listUps)
		for i := range sids {
			if sids[i], err = b.c.openSession(ctx, fmt.Sprintf("%s/u%d", up.mcpURL, i)); err != nil {
				return err
			}
		}
		var lat []time.Duration
		tools, pages := 0, 0
		for range warmRuns + 1 {
			t0 := time.Now()
			tools, pages = 0, 0
			for i, sid := range sids {
				n, p, err := b.c.toolsList(ctx, fmt.Sprintf("%s/u%d", up.mcpURL, i), sid)
				if err != nil {
					return err
				}
				tools, pages = tools+n, pages+p
			}
			lat = append(lat, time.Since(t0))
		}
		lat = sortDurations(lat[1:])
		fmt.Fprintf(b.out, "| direct (each upstream in turn) | warm | %d | %d | %s | %s | — | — |\n", tools, pages, fmtDur(pct(lat, 50)), fmtDur(lat[0]))
	}
	if !b.want("mcpgw") {
		return nil
	}
	var ups strings.Builder
	for i := range b.o.listUps {
		fmt.Fprintf(&ups, "  u%d:\n    url: %s/u%d\n", i, up.mcpURL, i)
	}
	cfg, err := b.writeConfig("list.yaml", "listen: 127.0.0.1:0\nupstreams:\n"+ups.String()+"routes:\n  - path: /mcp\n")
	if err != nil {
		return err
	}
	var cold, warm stats
	tools, pages := 0, 0
	for rep := range b.o.reps {
		gw, err := b.start(fmt.Sprintf("mcpgw-list-%d", rep), roleGateway, "-config", cfg)
		if err != nil {
			return err
		}
		url := gw.mcpURL + "/mcp"
		sid, err := b.c.openSession(ctx, url)
		if err != nil {
			return err
		}
		pass := func(st *stats) error {
			before, err := gw.sample(false)
			if err != nil {
				return err
			}
			t0 := time.Now()
			n, p, err := b.c.toolsList(ctx, url, sid)
			d := time.Since(t0)
			if err != nil {
				return err
			}
			after, err := gw.sample(false)
			if err != nil {
				return err
			}
			if n != total {
				st.errs++
				st.errMsg = fmt.Sprintf("%d tools, want %d", n, total)
			}
			tools, pages = n, p
			st.add(result{lat: []time.Duration{d}, wall: d}, before, after)
			return nil
		}
		if err := pass(&cold); err != nil {
			return err
		}
		var wg sync.WaitGroup
		if b.o.profileDir != "" && rep == 0 {
			wg.Go(func() {
				fetch(gw.statsURL+"/debug/pprof/profile?seconds=2", filepath.Join(b.o.profileDir, "mcpgw-cpu-list-warm.pprof"))
			})
		}
		for range warmRuns {
			if err := pass(&warm); err != nil {
				return err
			}
		}
		wg.Wait()
		gw.stop()
	}
	for _, r := range []struct {
		name string
		st   *stats
	}{{"cold (first listing of a fresh mcpgw)", &cold}, {"warm", &warm}} {
		lat := sortDurations(r.st.lat)
		note := ""
		if r.st.errs > 0 {
			note = " (" + r.st.errMsg + ")"
		}
		fmt.Fprintf(b.out, "| mcpgw | %s | %d%s | %d | %s | %s | %s | %d |\n", r.name, tools, note, pages,
			fmtDur(pct(lat, 50)), fmtDur(lat[0]), r.st.perCall(r.st.cpu), r.st.mallocs/uint64(max(r.st.calls, 1)))
	}
	return nil
}

// idleSessions is scenario 3: the RSS and heap of n idle legacy sessions.
// idleWarm is how many sessions the idle scenario opens before measuring.
const idleWarm = 50

func (b *bench) idleSessions(ctx context.Context) error {
	if !b.want("mcpgw") {
		return nil
	}
	// Room for the warm-up's sessions and the measured ones (the default
	// sessions.max_sessions is the default -idle); never below the default,
	// which max_sessions_per_principal's default must not exceed.
	_, _, gw, err := b.startEcho(fmt.Sprintf("sessions:\n  max_sessions: %d\n", max(b.o.idle+idleWarm+100, config.DefaultMaxSessions)))
	if err != nil {
		return err
	}
	url := gw.mcpURL + "/mcp"
	if _, err := b.openSessions(ctx, url, idleWarm, 8); err != nil { // warm: pools, first-use allocations
		return err
	}
	before, err := gw.sample(true)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := b.openSessions(ctx, url, b.o.idle, 32); err != nil {
		return err
	}
	open := time.Since(t0)
	time.Sleep(time.Second)
	after, err := gw.sample(true)
	if err != nil {
		return err
	}
	n := int64(b.o.idle)
	fmt.Fprintf(b.out, "\n## %d idle legacy sessions on mcpgw\n\n", b.o.idle)
	fmt.Fprintln(b.out, "| opened in | RSS before | RSS after | RSS per session | live heap per session |")
	fmt.Fprintln(b.out, "|--:|--:|--:|--:|--:|")
	fmt.Fprintf(b.out, "| %s | %s | %s | %.1f KiB | %.1f KiB |\n", fmtDur(open), mib(before.rss), mib(after.rss),
		float64(after.rss-before.rss)/float64(n)/1024, (float64(after.heap)-float64(before.heap))/float64(n)/1024)
	return nil
}

// big is scenario 5: a 1 MiB tool result through each target: time per
// call at c=1, then bigCalls at bigConc with the middle process's RSS
// polled for its peak, and its RSS a little after the load.
func (b *bench) big(ctx context.Context) error {
	up, fwd, gw, err := b.startEcho("")
	if err != nil {
		return err
	}
	eps := b.echoEndpoints("http", "stateless", "big", up, fwd, gw)
	want := []byte("xxxxxxxxxxxxxxxx")
	serial := max(b.o.bigCalls/10, 5)
	fmt.Fprintf(b.out, "\n## a %s tool result (stateless requests): %d calls at c=1 × %d reps (the rows' calls interleaved), then %d calls at c=%d\n\n", mib(int64(b.o.bigBytes)), serial, b.o.reps, b.o.bigCalls, b.o.bigConc)
	fmt.Fprintln(b.out, "| target | p50 c=1 | added p50 | CPU/call | allocs/call | bytes allocated/call | RSS before | peak RSS | RSS 3 s after | errors |")
	fmt.Fprintln(b.out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	rows := make([]stats, len(eps))
	mk := func(ep endpoint, c, calls int) load {
		return load{conc: c, tool: ep.tool, args: `{}`, want: want, calls: calls, stateless: true}
	}
	for _, ep := range eps { // warm-up
		var st stats
		if err := b.runOnce(ctx, ep, mk(ep, 1, 3), &st, ""); err != nil {
			return err
		}
		if st.errs > 0 {
			return fmt.Errorf("big via %s: %s", ep.name, st.errMsg)
		}
	}
	loads := make([]load, len(eps))
	for i, ep := range eps {
		loads[i] = mk(ep, 1, serial)
	}
	for range b.o.reps { // the rows' calls in turn, as at c=1 in scenario 1
		if err := b.interleaved(ctx, eps, loads, 0, rows, ""); err != nil {
			return err
		}
	}
	var paired [][]time.Duration
	if eps[0].name == "direct" {
		paired = pairedAdded(rows)
	}
	var direct time.Duration
	var directLat []time.Duration
	for i, ep := range eps {
		st := &rows[i]
		lat := sortDurations(st.lat)
		p50 := pct(lat, 50)
		added, cpu, allocs, bytesPer := "—", "—", "—", "—"
		if ep.name == "direct" {
			direct, directLat = p50, lat
		} else if direct > 0 {
			added = addedDur(p50-direct, addedHalfWidth(lat, directLat))
			if paired != nil {
				added += " (paired " + addedDur(pct(paired[i], 50), medianHalfWidth(paired[i])) + ")"
			}
		}
		rssBefore, rssPeak, rssAfter := "—", "—", "—"
		if ep.middle != nil && st.calls > 0 {
			cpu = st.perCall(st.cpu)
			allocs = fmt.Sprint(st.mallocs / uint64(st.calls))
			bytesPer = fmt.Sprintf("%.2f MiB", float64(st.alloc)/float64(st.calls)/(1<<20))
			before, peak, after, errs, err := b.bigRSS(ctx, ep, mk(ep, b.o.bigConc, b.o.bigCalls))
			if err != nil {
				return err
			}
			st.errs += errs
			rssBefore, rssPeak, rssAfter = mib(before), mib(peak), mib(after)
		}
		fmt.Fprintf(b.out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", ep.name, fmtDur(p50), added, cpu, allocs, bytesPer, rssBefore, rssPeak, rssAfter, st.errs)
	}
	return nil
}

// bigRSS runs l against ep while polling the middle process's RSS.
func (b *bench) bigRSS(ctx context.Context, ep endpoint, l load) (before, peak, after int64, errs int, err error) {
	before = ep.middle.rss()
	peak = before
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, ep.middle.rss())
			}
		}
	})
	if b.o.profileDir != "" && ep.name == "mcpgw" {
		wg.Go(func() {
			fetch(ep.middle.statsURL+"/debug/pprof/profile?seconds=3", filepath.Join(b.o.profileDir, "mcpgw-cpu-big.pprof"))
		})
	}
	r := b.c.run(ctx, ep.url, l)
	close(done)
	wg.Wait()
	if b.o.profileDir != "" && ep.name == "mcpgw" {
		fetch(ep.middle.statsURL+"/debug/pprof/allocs", filepath.Join(b.o.profileDir, "mcpgw-allocs-big.pprof"))
	}
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
		return 0, 0, 0, 0, ctx.Err()
	}
	return before, peak, ep.middle.rss(), r.errs, nil
}

// runRatios compares row m with the forwarder's row f run by run: the
// median, over the repetitions, of m's throughput and CPU per call each
// divided by f's in the same repetition, with their range. The two rows'
// runs of one repetition follow each other, so their ratio sees one state
// of the host; the summed columns mix the host's drift between
// repetitions into both rows, and at a ratio near 1.0 that drift decides
// the comparison. "—" without two repetitions to compare.
func runRatios(m, f *stats) string {
	n := min(len(m.runs), len(f.runs))
	if n < 2 {
		return "—"
	}
	var tput, cpu []float64
	for k := range n {
		a, b := m.runs[k], f.runs[k]
		if a.calls == 0 || b.calls == 0 || a.wall <= 0 || b.wall <= 0 {
			continue
		}
		tput = append(tput, (float64(a.calls)/a.wall.Seconds())/(float64(b.calls)/b.wall.Seconds()))
		if b.cpu > 0 {
			cpu = append(cpu, (float64(a.cpu)/float64(a.calls))/(float64(b.cpu)/float64(b.calls)))
		}
	}
	if len(tput) < 2 {
		return "—"
	}
	out := "calls/s " + ratioSpread(tput)
	if len(cpu) >= 2 {
		out += ", CPU " + ratioSpread(cpu)
	}
	return out + fmt.Sprintf(" (%d runs)", len(tput))
}

// ratioSpread is "1.04× (0.97–1.10)": the median and the range.
func ratioSpread(r []float64) string {
	slices.Sort(r)
	med := r[len(r)/2]
	if len(r)%2 == 0 {
		med = (r[len(r)/2-1] + r[len(r)/2]) / 2
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", med, r[0], r[len(r)-1])
}
