package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpgw/mcpgw/test/faulty"
)

// markerEnv is set in the gateway's environment; every process it starts
// inherits it (each stdio upstream names it in inherit_env), so the soak finds the gateway's children and grandchildren
// (and any left behind) by scanning /proc for it.
const markerEnv = "MCPGW_SOAK_RUN"

// faultyGrandchildEnv marks the grandchild fault's processes.
const faultyGrandchildEnv = faulty.GrandchildEnv

// build compiles the gateway and the faulty server into dir. The gateway's
// binary is not called mcpgw: a `pkill mcpgw` or `killall mcpgw` meant for
// other gateways on a shared machine must not end the soak's.
func build(ctx context.Context, repo, dir string) (mcpgw, faulty string, err error) {
	mcpgw, faulty = filepath.Join(dir, "gw-under-soak"), filepath.Join(dir, "faulty")
	for _, b := range [][2]string{{mcpgw, "./cmd/mcpgw"}, {faulty, "./test/faulty/cmd/faulty"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b[0], b[1])
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return mcpgw, faulty, nil
}

// repoRoot is the directory of the module's go.mod.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the mcpgw module: run the soak from the repository (go run ./test/soak)")
	}
	return filepath.Dir(mod), nil
}

// configGen is one generation of the gateway's config. Reloads alternate
// what they change so that each kind of change happens under load: an
// upstream added and removed (extra), a stdio upstream replaced (its env
// changes), an HTTP upstream replaced (its timeout changes). demo never
// changes: its calls must all succeed. f2026 and fhttp also speak
// 2026-07-28, so the gateway talks to them statelessly for 2026 callers
// and over a second, initialized connection for older ones.
type configGen struct {
	mcpgw, faulty string
	httpURL       string
	gen           int
	// httpTimeout is fhttp's timeout in seconds: a change replaces the
	// upstream, closing its connections, so reloads change it only in
	// the first three quarters of the run — a replacement would also end
	// what the gateway leaks on them, which the end of the run must see.
	httpTimeout int
	broken      bool // a config the reload must refuse, changing nothing
}

func (c configGen) yaml() string {
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\n")
	if c.broken {
		b.WriteString("no_such_key: true # the soak's deliberately broken config\n")
	}
	b.WriteString("upstreams:\n")
	fmt.Fprintf(&b, "  demo:\n    command: [%s, demo-server]\n    inherit_env: [%s]\n    timeout: 20s\n", q(c.mcpgw), markerEnv)
	fmt.Fprintf(&b, "  fstdio:\n    command: [%s, --name, fstdio]\n    env: {FAULTY_GEN: %q}\n    inherit_env: [%s]\n    timeout: 3s\n    max_line_bytes: 1048576\n", q(c.faulty), strconv.Itoa(c.gen%3), markerEnv)
	fmt.Fprintf(&b, "  f2026:\n    command: [%s, --name, f2026, --modern]\n    inherit_env: [%s]\n    timeout: 3s\n    max_line_bytes: 1048576\n", q(c.faulty), markerEnv)
	fmt.Fprintf(&b, "  fstate:\n    command: [%s, --name, fstate]\n    inherit_env: [%s]\n    stateful: true\n    timeout: 3s\n    max_line_bytes: 1048576\n", q(c.faulty), markerEnv)
	fmt.Fprintf(&b, "  fhttp:\n    url: %s\n    timeout: %ds\n", c.httpURL, c.httpTimeout)
	if c.gen%4 < 2 {
		fmt.Fprintf(&b, "  extra:\n    command: [%s, --name, extra]\n    inherit_env: [%s]\n    timeout: 3s\n", q(c.faulty), markerEnv)
	}
	b.WriteString("routes:\n  - path: /mcp\n  - path: /demo\n    upstreams: [demo]\n    prefix: false\n")
	return b.String()
}

// gateway is the running mcpgw process and what its logs told.
type gateway struct {
	cmd    *exec.Cmd
	pid    int
	marker string
	config string
	mcpURL string // http://127.0.0.1:PORT (no path)
	admin  string // http://127.0.0.1:PORT
	exited chan struct{}
	exit   error

	mu      sync.Mutex
	tail    []string // the last log lines, for the report
	reloads chan string
	levels  map[string]int
	msgs    map[string]int
	logFile io.Writer
}

// startGateway runs `mcpgw run` on configPath and waits until it serves.
func startGateway(mcpgw, configPath, marker string, logFile io.Writer) (*gateway, error) {
	g := &gateway{marker: marker, config: configPath, exited: make(chan struct{}), reloads: make(chan string, 16),
		levels: map[string]int{}, msgs: map[string]int{}, logFile: logFile}
	cmd := exec.Command(mcpgw, "run", "-c", configPath, "--log-format", "json", "--drain-timeout", "5s")
	cmd.Env = append(os.Environ(), markerEnv+"="+marker, "GOTRACEBACK=all")
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g.cmd, g.pid = cmd, cmd.Process.Pid
	urls := make(chan [2]string, 4)
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		g.readLogs(stderr, urls)
	}()
	go func() {
		<-logsDone // Wait closes the pipe: let the reader finish first
		g.exit = cmd.Wait()
		close(g.exited)
	}()
	deadline := time.After(60 * time.Second)
	for g.mcpURL == "" || g.admin == "" {
		select {
		case u := <-urls:
			switch u[0] {
			case "mcp":
				g.mcpURL = u[1]
			case "admin":
				g.admin = u[1]
			}
		case <-g.exited:
			return nil, fmt.Errorf("mcpgw exited at start (%v); last log lines:\n%s", g.exit, g.lastLines(30))
		case <-deadline:
			g.kill()
			return nil, fmt.Errorf("mcpgw did not serve within 60s; last log lines:\n%s", g.lastLines(30))
		}
	}
	return g, nil
}

func (g *gateway) readLogs(r io.Reader, urls chan<- [2]string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if g.logFile != nil {
			_, _ = g.logFile.Write(append(bytes.Clone(line), '\n'))
		}
		var m struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			URL   string `json:"url"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		g.mu.Lock()
		g.levels[m.Level]++
		if m.Level == "warn" || m.Level == "error" {
			g.msgs[m.Level+": "+m.Msg]++
		}
		if m.Msg != "child stderr" { // the stderr fault's flood would push out everything else
			g.tail = append(g.tail, string(line))
			if len(g.tail) > 200 {
				g.tail = g.tail[len(g.tail)-100:]
			}
		}
		g.mu.Unlock()
		// Never block here: a reader that stops reading would stall the
		// gateway on its own stderr.
		var u [2]string
		switch {
		case m.Msg == "serving MCP" && strings.HasSuffix(m.URL, "/mcp"):
			u = [2]string{"mcp", strings.TrimSuffix(m.URL, "/mcp")}
		case m.Msg == "serving admin endpoints":
			u = [2]string{"admin", m.URL}
		case m.Msg == "config reloaded" || strings.HasPrefix(m.Msg, "config reload failed"):
			select {
			case g.reloads <- m.Msg:
			default:
			}
		}
		if u[0] != "" {
			select {
			case urls <- u:
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

func (g *gateway) lastLines(n int) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tail
	if len(t) > n {
		t = t[len(t)-n:]
	}
	return strings.Join(t, "\n")
}

// logSummary counts the gateway's log lines by level and its most frequent
// warnings and errors.
func (g *gateway) logSummary() (levels map[string]int, top []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	levels = map[string]int{}
	for k, v := range g.levels {
		levels[k] = v
	}
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range g.msgs {
		all = append(all, kv{k, v})
	}
	for i := range all { // a few entries: selection sort is plenty
		for j := i + 1; j < len(all); j++ {
			if all[j].v > all[i].v || all[j].v == all[i].v && all[j].k < all[i].k {
				all[i], all[j] = all[j], all[i]
			}
		}
	}
	for i := 0; i < len(all) && i < 12; i++ {
		top = append(top, fmt.Sprintf("%6d× %s", all[i].v, all[i].k))
	}
	return levels, top
}

// reload rewrites the config file and sends SIGHUP; it returns the
// gateway's verdict ("config reloaded" or the failure line).
func (g *gateway) reload(content string) (string, error) {
	for len(g.reloads) > 0 { // a verdict nobody waited for
		<-g.reloads
	}
	tmp := g.config + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, g.config); err != nil {
		return "", err
	}
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return "", err
	}
	select {
	case v := <-g.reloads:
		return v, nil
	case <-g.exited:
		return "", fmt.Errorf("mcpgw exited during a reload: %v", g.exit)
	case <-time.After(60 * time.Second):
		return "", errors.New("no reload verdict in the log within 60s")
	}
}

// metrics reads the gateway's goroutine count from its admin listener's
// /metrics (the Go collector's go_goroutines).
func (g *gateway) goroutines(hc *http.Client) (int, error) {
	resp, err := hc.Get(g.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	v, ok := metricValue(body, "go_goroutines")
	if !ok {
		return 0, errors.New("/metrics has no go_goroutines")
	}
	return int(v), nil
}

// metricValue finds an unlabelled sample in a Prometheus text exposition.
func metricValue(exposition []byte, name string) (float64, bool) {
	for _, line := range strings.Split(string(exposition), "\n") {
		rest, ok := strings.CutPrefix(line, name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil
	}
	return 0, false
}

// rssBytes reads VmRSS from /proc/<pid>/status.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseRSS(b)
}

func parseRSS(status []byte) (int64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb << 10, err
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// proc is one process found carrying the soak's marker.
type proc struct {
	pid, ppid int
	state     string // R, S, Z, ...
	argv      string
	// grandchild: started by a faulty upstream's grandchild fault.
	grandchild bool
}

// group is how the report sorts processes: by argv, grandchildren apart.
func (p proc) group() string {
	if p.grandchild {
		return "grandchild of " + filepath.Base(p.argv)
	}
	return p.argv
}

// marked lists the processes whose environment carries marker, except the
// gateway itself (pid). Processes that vanish while being read are skipped.
func marked(marker string, gatewayPID int) []proc {
	ents, _ := os.ReadDir("/proc")
	want := []byte(markerEnv + "=" + marker + "\x00")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == gatewayPID || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			continue
		}
		p := proc{pid: pid, grandchild: bytes.Contains(env, []byte(faultyGrandchildEnv+"=1"))}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			p.ppid, p.state = parseStat(stat)
		}
		if cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil {
			p.argv = strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
		}
		out = append(out, p)
	}
	return out
}

// parseStat reads the state and parent pid from /proc/<pid>/stat, whose
// second field (the command) may hold spaces and parentheses.
func parseStat(stat []byte) (ppid int, state string) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, ""
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, ""
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0]
}

// orphans lists the grandchildren among ps whose parent is not among ps:
// their faulty parent died and its process group was not stopped.
func orphans(ps []proc) []proc {
	alive := map[int]bool{}
	for _, p := range ps {
		alive[p.pid] = true
	}
	var out []proc
	for _, p := range ps {
		if p.grandchild && !alive[p.ppid] {
			out = append(out, p)
		}
	}
	return out
}

// zombies lists the gateway's children that exited and were not reaped.
// A zombie's environment cannot be read, so they are found by parent pid.
func zombies(gatewayPID int) []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if ppid, state := parseStat(stat); ppid == gatewayPID && state == "Z" {
			out = append(out, proc{pid: pid, ppid: ppid, state: state})
		}
	}
	return out
}

// shutdown sends SIGTERM and waits for the gateway to exit.
func (g *gateway) shutdown(wait time.Duration) error {
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-g.exited:
		return g.exit
	case <-time.After(wait):
		g.kill()
		return fmt.Errorf("mcpgw did not exit within %s of SIGTERM (killed)", wait)
	}
}

func (g *gateway) kill() {
	_ = g.cmd.Process.Kill()
	<-g.exited
}

// alive reports whether the gateway is still running.
func (g *gateway) alive() bool {
	select {
	case <-g.exited:
		return false
	default:
		return true
	}
}

// goroutineSummary groups the goroutines of a Go stack dump (as SIGQUIT
// prints it) by where they were created and the first frame outside the
// runtime, most numerous first.
func goroutineSummary(dump []byte, n int) string {
	counts := map[string]int{}
	for _, block := range strings.Split(string(dump), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) == 0 || !strings.HasPrefix(lines[0], "goroutine ") {
			continue
		}
		top, creator := "", ""
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "goroutine ") {
				continue
			}
			if c, ok := strings.CutPrefix(l, "created by "); ok {
				creator = strings.Fields(c)[0]
				continue
			}
			fn := l
			if i := strings.LastIndexByte(fn, '('); i > 0 {
				fn = fn[:i]
			}
			if top == "" && !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "internal/") && !strings.HasPrefix(fn, "sync.") {
				top = fn
			}
		}
		counts[creator+" | "+top]++
	}
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range counts {
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.v != b.v {
			return b.v - a.v
		}
		return strings.Compare(a.k, b.k)
	})
	var b strings.Builder
	for i := 0; i < len(all) && i < n; i++ {
		fmt.Fprintf(&b, "  %5d  %s\n", all[i].v, all[i].k)
	}
	return b.String()
}
