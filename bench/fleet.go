package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The fleet scenario: what a replica costs and what Redis costs, in one
// table. Rows: one mcpgw alone, one with sessions.redis, three behind
// HAProxy in http mode without and with Redis, three behind HAProxy in
// tcp mode with Redis, and three with Redis whose connections the
// generator spreads itself (no balancer process: what the replicas alone
// cost, as behind a balancer in the kernel); every replica shares one key
// ring, so any of them
// serves any session. The http rows balance as docs/operations.md
// recommends for a fleet: a session's requests to one replica by a
// consistent hash of Mcp-Session-Id (round robin for requests without
// one, such as 2026-07-28 stateless requests) — not needed for
// correctness, but a session's state (its replay log, a stateful
// upstream's connection) is then where its requests are. The tcp row
// balances connections, as a Kubernetes Service does. The same echo
// upstream and load generator as the call scenario, at c=32, over 16
// legacy sessions and as 2026-07-28 stateless requests. CPU per call is
// summed over every process of the row: the replicas, HAProxy and
// redis-server; the generator's own CPU is not counted.

const (
	fleetConc     = 32
	fleetSessions = 16
)

// fleetRow is one way to serve the calls, and the processes that do it.
type fleetRow struct {
	name     string
	replicas int
	redis    bool
	url      string
	gws      []*child
	lbMode   string   // HAProxy's mode: "http" (per request) or "tcp" (per connection); "client": no HAProxy, the generator spreads its connections
	spread   []string // lbMode "client": the replicas' URLs
	lb       *extProc // nil: the one replica is called directly
	rds      *extProc // nil: no Redis
}

// profileTag names the balancer's mode in a profile's file name.
func (r *fleetRow) profileTag() string {
	if r.lbMode == "" {
		return ""
	}
	return "-" + r.lbMode
}

// extProc is a process that is not this binary (redis-server, haproxy):
// only its CPU is read.
type extProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startExt(dir, name, bin string, args ...string) (*extProc, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &extProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	return p, nil
}

func (p *extProc) stop() {
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second): // cleanup, not a measurement
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *extProc) cpu() (time.Duration, error) {
	if p == nil {
		return 0, nil
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(stat)
}

// freePort is a port nothing listens on now (the child binds it next).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListen waits until addr accepts connections.
func waitListen(addr string, p *extProc) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start", p.cmd.Path)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: nothing listens on %s after 10s", p.cmd.Path, addr)
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
}

// fleetCPU is a row's CPU so far: replicas (each, and their sum),
// balancer, Redis.
func (r *fleetRow) fleetCPU() (each []time.Duration, gw, lb, rds time.Duration, err error) {
	for _, g := range r.gws {
		s, err := g.sample(false)
		if err != nil {
			return nil, 0, 0, 0, err
		}
		each = append(each, s.cpu)
		gw += s.cpu
	}
	if lb, err = r.lb.cpu(); err != nil {
		return
	}
	rds, err = r.rds.cpu()
	return
}

// fleet is the fleet scenario.
func (b *bench) fleet(ctx context.Context) error {
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		fmt.Fprintln(b.out, "\n## fleet: skipped (redis-server not installed)")
		return nil
	}
	haproxyBin, _ := exec.LookPath("haproxy") // without it: the one-replica rows only
	up, err := b.start("upstream", roleUpstream, "-big", fmt.Sprint(b.o.bigBytes))
	if err != nil {
		return err
	}
	b.upstream = up
	var ext []*extProc
	defer func() {
		for _, p := range ext {
			p.stop()
		}
	}()
	rport, err := freePort()
	if err != nil {
		return err
	}
	rds, err := startExt(b.dir, "redis-server", redisBin, "--port", strconv.Itoa(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return err
	}
	ext = append(ext, rds)
	if err := waitListen("127.0.0.1:"+strconv.Itoa(rport), rds); err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(b.dir, "session-keys")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		return err
	}
	gateway := func(name string, redis bool, procs int) (*child, error) {
		extra := ""
		if redis {
			extra = fmt.Sprintf("  redis:\n    addr: 127.0.0.1:%d\n    key_prefix: \"%s:\"\n", rport, name)
		}
		cfg, err := b.writeConfig(name+".yaml", fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  up:
    url: %s/mcp
  st:
    url: %s/stateless
routes:
  - path: /mcp
sessions:
  key_file: %s
%s`, up.mcpURL, up.mcpURL, keyFile, extra))
		if err != nil {
			return nil, err
		}
		return b.start(name, roleGateway, "-config", cfg, "-gomaxprocs", strconv.Itoa(procs))
	}
	var rows []*fleetRow
	for _, shape := range []struct {
		n      int
		lbMode string
		redis  bool
	}{{1, "", false}, {1, "", true}, {3, "http", false}, {3, "http", true}, {3, "tcp", true}, {3, "client", true}} {
		n := shape.n
		if n > 1 && shape.lbMode != "client" && haproxyBin == "" {
			fmt.Fprintln(b.log, "bench: fleet: haproxy not installed; the HAProxy rows are skipped")
			continue
		}
		r := &fleetRow{replicas: n, redis: shape.redis, lbMode: shape.lbMode}
		r.name = fmt.Sprintf("%d replica", n)
		tag := "mem"
		if n > 1 {
			r.name = fmt.Sprintf("%d replicas + HAProxy %s", n, shape.lbMode)
			if shape.lbMode == "client" {
				r.name = fmt.Sprintf("%d replicas", n)
			}
			tag = shape.lbMode + "-mem"
		}
		if shape.redis {
			r.name += " + Redis"
			r.rds, tag = rds, strings.Replace(tag, "mem", "redis", 1)
		}
		if shape.lbMode == "client" {
			r.name += ", connections spread by the generator"
		}
		for i := range n {
			gw, err := gateway(fmt.Sprintf("fleet-%d-%s-r%d", n, tag, i+1), shape.redis, replicaProcs(n))
			if err != nil {
				return err
			}
			r.gws = append(r.gws, gw)
		}
		r.url = r.gws[0].mcpURL + "/mcp"
		if shape.lbMode == "client" {
			for _, g := range r.gws {
				r.spread = append(r.spread, g.mcpURL+"/mcp")
			}
		} else if n > 1 {
			lb, url, err := b.startHAProxy(haproxyBin, fmt.Sprintf("haproxy-%d-%s", n, tag), shape.lbMode, r.gws)
			if err != nil {
				return err
			}
			ext = append(ext, lb)
			r.lb, r.url = lb, url
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(b.out, "\n## fleet: tools/call (small echo) at c=%d, %d × %s per row, alternating\n\n", fleetConc, b.o.reps, b.o.dur)
	fmt.Fprintln(b.out, "CPU/call is summed over every process of the row (replicas, HAProxy, redis-server); the ratios are to the first row, run by run.")
	fmt.Fprintln(b.out)
	fmt.Fprintln(b.out, "| mode | row | calls/s | p50 | p99 | CPU/call | replicas | HAProxy | redis-server | errors | ÷ 1 replica, run by run |")
	fmt.Fprintln(b.out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, mode := range b.o.modes {
		if err := b.fleetCell(ctx, mode, rows); err != nil {
			return err
		}
	}
	return nil
}

// startHAProxy puts HAProxy in front of gws, without health checks (every
// replica is up for the whole run). In http mode it sends a session's
// requests to one replica (a consistent hash of Mcp-Session-Id; round
// robin for requests without it), in tcp mode each connection to the next
// replica. One thread: HAProxy gets its share of the cores as each replica
// does (replicaProcs); paired runs with two read the same within noise.
func (b *bench) startHAProxy(bin, name, mode string, gws []*child) (*extProc, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addrs := make([]string, len(gws))
	for i, g := range gws {
		addrs[i] = strings.TrimPrefix(g.mcpURL, "http://")
	}
	cfg := filepath.Join(b.dir, name+".cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(mode, port, addrs)), 0o600); err != nil {
		return nil, "", err
	}
	p, err := startExt(b.dir, name, bin, "-db", "-f", cfg)
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if err := waitListen(addr, p); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, "http://" + addr + "/mcp", nil
}

// haproxyConfig is startHAProxy's configuration: listening on port,
// balancing over servers (host:port) in mode "http" or "tcp".
func haproxyConfig(mode string, port int, servers []string) string {
	balance := "roundrobin"
	if mode == "http" {
		balance = "hdr(Mcp-Session-Id)\n    hash-type consistent"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `global
    maxconn 2000
    nbthread 1
defaults
    mode %s
    timeout connect 2s
    timeout client 60s
    timeout server 60s
frontend mcp
    bind 127.0.0.1:%d
    default_backend mcpgw
backend mcpgw
    balance %s
`, mode, port, balance)
	for i, s := range servers {
		fmt.Fprintf(&b, "    server r%d %s\n", i+1, s)
	}
	return b.String()
}

// fleetCell measures every row in one mode, alternating.
func (b *bench) fleetCell(ctx context.Context, mode string, rows []*fleetRow) error {
	type acc struct {
		st          stats
		gw, lb, rds time.Duration
		each        []time.Duration // per replica: how evenly the balancer spread the work
	}
	accs := make([]acc, len(rows))
	loads := make([]load, len(rows))
	for i, r := range rows {
		l := load{conc: fleetConc, tool: "up__echo", args: `{"text":"hello"}`, want: []byte(`hello`), dur: b.o.dur, spread: r.spread}
		if mode == "stateless" {
			l.tool, l.stateless = "st__echo", true
		} else {
			ids, err := b.openSessions(ctx, r.url, fleetSessions, fleetSessions)
			if err != nil {
				return fmt.Errorf("fleet %s: %w", r.name, err)
			}
			l.sessions = ids
		}
		loads[i] = l
	}
	run := func(i int, l load, a *acc, profile string) error {
		r := rows[i]
		each0, gw0, lb0, rds0, err := r.fleetCPU()
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		if profile != "" { // the first replica's: what a call costs it
			secs := max(int(l.dur.Seconds()), 1)
			wg.Go(func() { fetch(r.gws[0].statsURL+fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), profile) })
		}
		res := b.c.run(ctx, r.url, l)
		wg.Wait()
		each1, gw1, lb1, rds1, err := r.fleetCPU()
		if err != nil {
			return err
		}
		if a.each == nil {
			a.each = make([]time.Duration, len(each1))
		}
		for k := range each1 {
			a.each[k] += each1[k] - each0[k]
		}
		a.gw += gw1 - gw0
		a.lb += lb1 - lb0
		a.rds += rds1 - rds0
		a.st.addMiddle(res, procSample{cpu: gw0 + lb0 + rds0}, procSample{cpu: gw1 + lb1 + rds1})
		return ctx.Err()
	}
	for i := range rows { // warm-up: connections, every replica's upstream session
		warm := loads[i]
		warm.dur = min(b.o.dur, 500*time.Millisecond)
		var a acc
		if err := run(i, warm, &a, ""); err != nil {
			return err
		}
		if a.st.errs > 0 {
			return fmt.Errorf("fleet %s %s: warm-up failed: %s", mode, rows[i].name, a.st.errMsg)
		}
	}
	for rep := range b.o.reps {
		for k := range rows {
			i := (k + rep) % len(rows)
			prof := ""
			if b.o.profileDir != "" && rep == 0 {
				prof = filepath.Join(b.o.profileDir, fmt.Sprintf("fleet-%s-%d-replicas%s-%s.pprof", mode, rows[i].replicas, rows[i].profileTag(), map[bool]string{false: "mem", true: "redis"}[rows[i].redis]))
			}
			if err := run(i, loads[i], &accs[i], prof); err != nil {
				return err
			}
		}
	}
	for i, r := range rows {
		a := &accs[i]
		lat := sortDurations(a.st.lat)
		tput := 0.0
		if a.st.wall > 0 {
			tput = float64(a.st.calls) / a.st.wall.Seconds()
		}
		lb, rd, vs := "—", "—", "—"
		gw := a.st.perCall(a.gw)
		if len(a.each) > 1 && a.gw > 0 { // the split: an uneven one is a busier replica, not a cheaper fleet
			parts := make([]string, len(a.each))
			for k, c := range a.each {
				parts[k] = fmt.Sprintf("%.0f%%", 100*c.Seconds()/a.gw.Seconds())
			}
			gw += " (" + strings.Join(parts, "/") + ")"
		}
		if r.lb != nil {
			lb = a.st.perCall(a.lb)
		}
		if r.rds != nil {
			rd = a.st.perCall(a.rds)
		}
		if i > 0 {
			vs = runRatios(&a.st, &accs[0].st)
		}
		errs := fmt.Sprint(a.st.errs)
		if a.st.errs > 0 {
			errs += " (" + strings.ReplaceAll(a.st.errMsg, "|", "/") + ")"
		}
		fmt.Fprintf(b.out, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			mode, r.name, tput, fmtDur(pct(lat, 50)), fmtDur(pct(lat, 99)), a.st.perCall(a.st.cpu), gw, lb, rd, errs, vs)
	}
	return nil
}

// replicaProcs is the GOMAXPROCS of each of n replicas sharing this
// machine: its share of the CPUs, at least one, as a replica gets in a
// fleet where each has a CPU limit. (The Go runtime sizes GOMAXPROCS to
// its cgroup's quota rounded up but never below 2, so a replica limited
// to under one core runs 1 only when told, GOMAXPROCS=1; on this machine
// 1 measured the same as 2 or a little cheaper.) Three replicas each
// running as many Ps as the machine has cores would spend the cores on
// idle Ps looking for work.
func replicaProcs(n int) int {
	if n <= 1 {
		return 0 // the runtime's choice: every core
	}
	return max(1, runtime.NumCPU()/n)
}
