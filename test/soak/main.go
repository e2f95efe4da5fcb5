// Command soak drives mcpgw under mixed traffic and injected faults for a
// while and then checks the gateway's invariants: every accepted request
// answered exactly once, nothing crossed between requests or sessions, no
// goroutine or memory growth beyond a stated bound, no child process left.
//
//	go run ./test/soak -duration 10m [-sessions 24] [-concurrency 12] [-seed 1]
//
// It builds the gateway (go build ./cmd/mcpgw) and the fault-injecting
// server (test/faulty) from this repository and runs the gateway with a
// generated config on 127.0.0.1 random ports: the built-in demo upstream
// (well-behaved: its calls must all succeed), a shared and a stateful
// faulty stdio upstream, a faulty Streamable HTTP upstream served from this
// process, a faulty stdio upstream speaking 2026-07-28, and an upstream
// that reloads add and remove. Sessions of every
// revision — 2025-11-25, 2025-06-18 and 2025-03-26 Streamable HTTP,
// 2024-11-05 HTTP+SSE, 2026-07-28 stateless requests — call tools, prompts,
// resources and lists, some cancelled, some with their stream cut and
// resumed, while faulty calls crash, hang, garble, flood and cut the
// upstreams, and the config is rewritten and reloaded with SIGHUP (now and
// then a broken one, which must be refused).
//
// Every call carries a unique token its answer must echo, so an answer that
// reaches the wrong request is caught. The summary goes to stdout; the exit
// status is 1 when an invariant failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpgw/mcpgw/test/faulty"
)

type options struct {
	duration, warmup, reloadEvery time.Duration
	sessions, concurrency         int
	seed                          uint64
	maxGoroutineGrowth            int
	maxRSSGrowthMiB               int64
	gatewayLog                    string
	faults                        map[faulty.Kind]bool
	verbose                       bool
	dumpGoroutines                bool
}

func kindList() string {
	var names []string
	for _, k := range faulty.Kinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// parseFaults reads -faults: "all", a list of kinds, or "all,-hang" (every
// kind but those named with a minus). echo is always on.
func parseFaults(s string) (map[faulty.Kind]bool, error) {
	out := map[faulty.Kind]bool{}
	for _, k := range faulty.Kinds {
		out[k] = false
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "all" {
			for _, k := range faulty.Kinds {
				out[k] = true
			}
			continue
		}
		on := !strings.HasPrefix(name, "-")
		k := faulty.Kind(strings.TrimPrefix(name, "-"))
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("-faults: unknown fault %q; the faults are %s (all, or all,-KIND to leave one out)", k, kindList())
		}
		out[k] = on
	}
	out[faulty.Echo] = true
	return out, nil
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", time.Minute, "how long to drive traffic (after the warm-up)")
	flag.DurationVar(&o.warmup, "warmup", 0, "warm-up before the baseline is measured (default: duration/6, at most 15s)")
	flag.DurationVar(&o.reloadEvery, "reload-every", 7*time.Second, "how often the config is rewritten and reloaded (SIGHUP)")
	flag.IntVar(&o.sessions, "sessions", 24, "downstream sessions open at a time (each is replaced after 20-300 requests)")
	flag.IntVar(&o.concurrency, "concurrency", 12, "requests in flight at a time")
	seed := flag.Int64("seed", 0, "random seed (0: from the clock); the same seed gives the same choices, not the same timing")
	flag.IntVar(&o.maxGoroutineGrowth, "max-goroutine-growth", 40, "the gateway's goroutines may grow this much from baseline to end")
	flag.Int64Var(&o.maxRSSGrowthMiB, "max-rss-growth-mib", 96, "the gateway's RSS may grow this many MiB from baseline to end")
	flag.StringVar(&o.gatewayLog, "gateway-log", "", "write the gateway's log to this `FILE`")
	flag.BoolVar(&o.dumpGoroutines, "goroutine-dump", false, "at the end, stop the gateway with SIGQUIT and summarise its goroutine dump (needs -gateway-log; skips the shutdown checks)")
	flag.BoolVar(&o.verbose, "v", false, "also print a sample error message for each call and error code")
	faults := flag.String("faults", "all", "fault `KINDS` to inject, comma-separated (of "+kindList()+"), all, or all,-KIND")
	flag.Parse()
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1e9
	}
	o.seed = uint64(*seed)
	if o.dumpGoroutines && o.gatewayLog == "" {
		fmt.Fprintln(os.Stderr, "soak: -goroutine-dump needs -gateway-log FILE (the dump is written there)")
		os.Exit(2)
	}
	var err error
	if o.faults, err = parseFaults(*faults); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if o.warmup == 0 {
		o.warmup = min(max(o.duration/6, 3*time.Second), 15*time.Second)
	}
	if o.sessions < 1 || o.concurrency < 1 || o.duration <= 0 {
		fmt.Fprintln(os.Stderr, "soak: -sessions, -concurrency and -duration must be positive")
		os.Exit(2)
	}
	ok, err := run(o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// run is the soak; it reports whether every invariant held.
func run(o options, out io.Writer) (bool, error) {
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupted)

	repo, err := repoRoot()
	if err != nil {
		return false, err
	}
	dir, err := os.MkdirTemp("", "soak-run-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "soak %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	logf("building the gateway and the faulty server")
	mcpgwBin, faultyBin, err := build(context.Background(), repo, dir)
	if err != nil {
		return false, err
	}

	// The faulty HTTP upstream lives in this process, so that idle
	// connections can be closed before measuring (the gateway's goroutines
	// on them would otherwise count as growth).
	fsrv := faulty.NewServer(faulty.Options{Name: upHTTP, Modern: true})
	mux := http.NewServeMux()
	fhttp := fsrv.HTTP()
	mux.Handle("/mcp", fhttp)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false, err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	var hsDone sync.WaitGroup
	hsDone.Add(1)
	go func() {
		defer hsDone.Done()
		_ = hs.Serve(ln)
	}()
	defer func() {
		_ = hs.Close()
		hsDone.Wait()
	}()

	cg := configGen{mcpgw: mcpgwBin, faulty: faultyBin, httpURL: "http://" + ln.Addr().String() + "/mcp", httpTimeout: 3}
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(cg.yaml()), 0o600); err != nil {
		return false, err
	}
	var logFile io.Writer
	if o.gatewayLog != "" {
		f, err := os.Create(o.gatewayLog)
		if err != nil {
			return false, err
		}
		defer f.Close()
		logFile = f
	}
	marker := fmt.Sprintf("%d-%x", os.Getpid(), rand.Uint64())
	gw, err := startGateway(mcpgwBin, cfgPath, marker, logFile)
	if err != nil {
		return false, err
	}
	defer func() {
		if gw.alive() {
			gw.kill()
		}
		for _, p := range marked(marker, gw.pid) { // never leave anything behind
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}()
	logf("gateway pid %d serving %s (admin %s)", gw.pid, gw.mcpURL, gw.admin)

	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	if err := waitReady(hc, gw, []string{upDemo, upStdio, upHTTP, up2026, upExtra}); err != nil {
		return false, err
	}
	st := newStats()
	cl := &client{base: gw.mcpURL, hc: hc, st: st}
	p := &pool{cl: cl, st: st, slots: make([]*slot, o.sessions), seed: o.seed, faults: o.faults, limit: &rateLimit{last: map[string]time.Time{}}}
	for i := range p.slots {
		p.slots[i] = &slot{}
	}
	quiesce := func() measure {
		p.closeAll()
		tr.CloseIdleConnections()
		// The faulty HTTP server drops its idle connections too, which
		// ends the gateway's goroutines reading them.
		hs.SetKeepAlivesEnabled(false)
		defer hs.SetKeepAlivesEnabled(true)
		m := settle(hc, gw)
		m.upstreamOpen = fhttp.InFlight()
		return m
	}
	start := measureNow(hc, gw, marker)

	logf("warm-up for %s", o.warmup)
	traffic(p, o, o.warmup, nil, interrupted)
	base := quiesce()
	logf("baseline: %d goroutines, RSS %s, %d children, %d fhttp calls open", base.goroutines, mib(base.rss), base.children, base.upstreamOpen)

	logf("soak for %s: %d sessions, %d in flight, reloads every %s, seed %d", o.duration, o.sessions, o.concurrency, o.reloadEvery, o.seed)
	calm := time.Now().Add(o.duration * 3 / 4)
	p.calmAfter.Store(&calm)
	rl := &reloader{gw: gw, cg: cg, replaceHTTPUntil: calm}
	peak := traffic(p, o, o.duration, rl, interrupted)
	if !gw.alive() {
		return report(out, o, st, start, base, measure{}, peak, rl, nil, []string{fmt.Sprintf("the gateway died during the soak: %v\n%s", gw.exit, gw.lastLines(30))}, gw), nil
	}
	// Back to the baseline's shape (extra present, fstdio replaced once
	// more), then measure idle.
	final := rl.cg.gen + 1
	for final%4 != 0 || final%3 == rl.cg.gen%3 {
		final++
	}
	if v, err := rl.to(final); err != nil || v != "config reloaded" {
		rl.failed = append(rl.failed, fmt.Sprintf("the final reload: %q %v", v, err))
	}
	end := quiesce()
	logf("end: %d goroutines, RSS %s, %d children, %d fhttp calls open", end.goroutines, mib(end.rss), end.children, end.upstreamOpen)
	var extra []string
	if end.upstreamOpen > 0 {
		extra = append(extra, fmt.Sprintf("%d calls still open at the HTTP upstream with no downstream request in flight: the gateway holds their streams (and a connection and goroutines each)", end.upstreamOpen))
	}
	extra = append(extra, rl.failed...)
	// The children at the end are those of the baseline (after the
	// warm-up made the connections that are made on first use): one per
	// shared connection, every stateful session's child reaped. A live
	// upstream's own grandchildren are its business (it may start more);
	// one whose parent died is checked below.
	for g, n := range end.groups {
		if strings.HasPrefix(g, "grandchild of ") {
			continue
		}
		if n > base.groups[g] {
			extra = append(extra, fmt.Sprintf("%d processes %q at the end, %d at the baseline", n, g, base.groups[g]))
		}
	}
	// A grandchild outlives its parent only if the gateway did not stop
	// the parent's process group when the parent died.
	for _, o := range orphans(marked(marker, gw.pid)) {
		extra = append(extra, fmt.Sprintf("an orphaned grandchild: pid %d (parent %d) %s", o.pid, o.ppid, o.argv))
	}
	if z := zombies(gw.pid); len(z) > 0 {
		extra = append(extra, fmt.Sprintf("%d zombie children of the gateway", len(z)))
	}

	if o.dumpGoroutines {
		logf("dumping the gateway's goroutines (SIGQUIT) into %s; no shutdown checks", o.gatewayLog)
		_ = gw.cmd.Process.Signal(syscall.SIGQUIT)
		<-gw.exited
		if f, ok := logFile.(*os.File); ok {
			_ = f.Sync()
			if b, err := os.ReadFile(o.gatewayLog); err == nil {
				fmt.Fprintf(out, "goroutines by creator and top frame:\n%s", goroutineSummary(b, 25))
			}
		}
		return report(out, o, st, start, base, end, peak, rl, nil, extra, gw), nil
	}
	logf("stopping the gateway (SIGTERM)")
	exitErr := gw.shutdown(30 * time.Second)
	if exitErr != nil {
		extra = append(extra, fmt.Sprintf("the gateway's exit after SIGTERM: %v", exitErr))
	}
	var left []proc
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if left = marked(marker, gw.pid); len(left) == 0 {
			break
		}
	}
	for _, c := range left {
		extra = append(extra, fmt.Sprintf("left after shutdown: pid %d (parent %d, state %s) %s", c.pid, c.ppid, c.state, c.argv))
	}
	return report(out, o, st, start, base, end, peak, rl, left, extra, gw), nil
}

// waitReady polls /readyz until the named upstreams are ready.
func waitReady(hc *http.Client, gw *gateway, names []string) error {
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if !gw.alive() {
			return fmt.Errorf("mcpgw exited: %v\n%s", gw.exit, gw.lastLines(30))
		}
		r, err := readiness(hc, gw)
		if err == nil {
			missing := 0
			for _, n := range names {
				if r[n] != "ready" {
					missing++
				}
			}
			if missing == 0 {
				return nil
			}
			last = fmt.Sprint(r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("upstreams not ready within 60s: %s", last)
}

// traffic runs the workers (and the reloader, if any) for d and returns
// the peak goroutines and RSS sampled meanwhile.
func traffic(p *pool, o options, d time.Duration, rl *reloader, interrupted <-chan os.Signal) measure {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.work(i, stop)
		}()
	}
	if rl != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rl.loop(o.reloadEvery, stop)
		}()
	}
	var peak measure
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	end := time.After(d)
	hc := p.cl.hc
	gw := rlGateway(rl)
loop:
	for {
		select {
		case <-end:
			break loop
		case <-interrupted:
			fmt.Fprintln(os.Stderr, "soak: interrupted; finishing early")
			break loop
		case <-tick.C:
			if gw == nil {
				continue
			}
			if !gw.alive() {
				break loop
			}
			if n, err := gw.goroutines(hc); err == nil {
				peak.goroutines = max(peak.goroutines, n)
			}
			if r, err := rssBytes(gw.pid); err == nil {
				peak.rss = max(peak.rss, r)
			}
			if c := len(marked(gw.marker, gw.pid)); c > peak.children {
				peak.children = c
			}
		}
	}
	close(stop)
	wg.Wait()
	return peak
}

func rlGateway(rl *reloader) *gateway {
	if rl == nil {
		return nil
	}
	return rl.gw
}

// settle waits until the gateway's goroutine count stops changing (three
// equal readings a second apart, at most 30s) and measures it.
func settle(hc *http.Client, gw *gateway) measure {
	prev, same := -1, 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && same < 3; time.Sleep(time.Second) {
		n, err := gw.goroutines(hc)
		if err != nil {
			continue
		}
		if n == prev {
			same++
		} else {
			prev, same = n, 0
		}
	}
	return measureNow(hc, gw, gw.marker)
}

func measureNow(hc *http.Client, gw *gateway, marker string) measure {
	var m measure
	m.goroutines, _ = gw.goroutines(hc)
	m.rss, _ = rssBytes(gw.pid)
	m.groups = map[string]int{}
	for _, p := range marked(marker, gw.pid) {
		m.children++
		m.groups[p.group()]++
	}
	return m
}

// reloader rewrites the config and sends SIGHUP every so often; every
// fifth time it first writes a broken config, which must be refused.
type reloader struct {
	gw *gateway
	cg configGen
	// replaceHTTPUntil: reloads replace fhttp (change its timeout) until then.
	replaceHTTPUntil time.Time
	count            int // reloads applied
	broken           int // broken configs refused
	failed           []string
}

func (r *reloader) to(gen int) (string, error) {
	r.cg.gen = gen
	if time.Now().Before(r.replaceHTTPUntil) {
		r.cg.httpTimeout = 3 + gen%2
	}
	v, err := r.gw.reload(r.cg.yaml())
	if err == nil && v == "config reloaded" {
		r.count++
	}
	return v, err
}

func (r *reloader) loop(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if n%5 == 0 {
			b := r.cg
			b.broken = true
			v, err := r.gw.reload(b.yaml())
			if err != nil || !strings.HasPrefix(v, "config reload failed") {
				r.failed = append(r.failed, fmt.Sprintf("a broken config was not refused: %q %v", v, err))
			} else {
				r.broken++
			}
		}
		if v, err := r.to(r.cg.gen + 1); err != nil || v != "config reloaded" {
			r.failed = append(r.failed, fmt.Sprintf("reload to generation %d: %q %v", r.cg.gen, v, err))
		}
	}
}

func report(out io.Writer, o options, st *stats, start, base, end, peak measure, rl *reloader, left []proc, extra []string, gw *gateway) bool {
	b := bounds{goroutines: o.maxGoroutineGrowth, rssBytes: o.maxRSSGrowthMiB << 20}
	v := st.verdict(base, end, b, extra)
	fmt.Fprintf(out, "\n== mcpgw soak: %s after a %s warm-up, %d sessions, %d in flight, seed %d\n", o.duration, o.warmup, o.sessions, o.concurrency, o.seed)
	var off []string
	for _, k := range faulty.Kinds {
		if !o.faults[k] {
			off = append(off, string(k))
		}
	}
	if len(off) > 0 {
		fmt.Fprintf(out, "faults       not injected: %s\n", strings.Join(off, ", "))
	}
	st.print(out, o.verbose)
	fmt.Fprintf(out, "reloads      %d applied, %d broken configs refused, %d problems\n", rl.count, rl.broken, len(rl.failed))
	fmt.Fprintf(out, "gateway      goroutines: start %d, baseline %d, peak %d, end %d (bound: end <= baseline + %d)\n", start.goroutines, base.goroutines, peak.goroutines, end.goroutines, b.goroutines)
	fmt.Fprintf(out, "             RSS: start %s, baseline %s, peak %s, end %s (bound: end <= baseline + %s)\n", mib(start.rss), mib(base.rss), mib(peak.rss), mib(end.rss), mib(b.rssBytes))
	fmt.Fprintf(out, "upstream     fhttp calls open at idle: baseline %d, end %d (bound: 0 at the end)\n", base.upstreamOpen, end.upstreamOpen)
	leftText := fmt.Sprint(len(left))
	if o.dumpGoroutines {
		leftText = "not checked (-goroutine-dump)"
	}
	fmt.Fprintf(out, "children     start %d, baseline %d, peak %d, end %d (bound: end <= baseline for each command but grandchildren of live upstreams; no orphan); left after shutdown: %s\n", start.children, base.children, peak.children, end.children, leftText)
	fmt.Fprintf(out, "             at the end: %s\n", fmtMap(end.groups))
	levels, top := gw.logSummary()
	fmt.Fprintf(out, "gateway log  %s\n", fmtMap(levels))
	for _, t := range top {
		fmt.Fprintf(out, "             %s\n", t)
	}
	if len(v) == 0 {
		fmt.Fprintln(out, "PASS: accepted == answered, nothing crossed or duplicated, growth within bounds, no child left")
		return true
	}
	fmt.Fprintln(out, "FAIL:")
	for _, x := range v {
		fmt.Fprintf(out, "  - %s\n", x)
	}
	return false
}

// readiness reads /readyz's upstream states.
func readiness(hc *http.Client, gw *gateway) (map[string]string, error) {
	resp, err := hc.Get(gw.admin + "/readyz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Upstreams map[string]struct {
			State string `json:"state"`
		} `json:"upstreams"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range r.Upstreams {
		out[k] = v.State
	}
	return out, nil
}
