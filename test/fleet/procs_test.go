package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The processes of the fleet: the gateway binary built once, three
// replicas of it, HAProxy in front.

// repoRoot is the module root (this package is test/fleet).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildGateway builds cmd/mcpgw into dir.
func buildGateway(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "mcpgw")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mcpgw")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/mcpgw: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// replica is one mcpgw process.
type replica struct {
	t      *testing.T
	name   string
	bin    string
	config string
	port   int
	admin  int
	log    string
	cmd    *exec.Cmd
	done   chan struct{}
}

func (r *replica) start() {
	r.t.Helper()
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(r.bin, "run", "--config", r.config)
	cmd.Env = append(os.Environ(),
		"MCPGW_LISTEN=127.0.0.1:"+strconv.Itoa(r.port),
		"MCPGW_ADMIN=127.0.0.1:"+strconv.Itoa(r.admin),
		"REPLICA="+r.name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start %s: %v", r.name, err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(r.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, _ := httpGet(r.adminURL("/readyz")); code == http.StatusOK {
			return
		}
		select {
		case <-r.done:
			r.t.Fatalf("%s exited at start:\n%s", r.name, r.tail())
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s not ready within 20s:\n%s", r.name, r.tail())
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
}

// stop ends the replica (SIGTERM, then SIGKILL) and waits for it.
func (r *replica) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second): // a stop that takes longer is forced: cleanup, not a check
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
	r.cmd = nil
}

func (r *replica) signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal %s: %v", r.name, err)
	}
}

func (r *replica) adminURL(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(r.admin) + path
}

func (r *replica) tail() string {
	b, _ := os.ReadFile(r.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// metric returns the sum of the samples of name whose labels contain
// every one of labels (e.g. `outcome="delivered"`).
func (r *replica) metric(name string, labels ...string) float64 {
	r.t.Helper()
	_, body := httpGet(r.adminURL("/metrics"))
	return sumMetric(body, name, labels...)
}

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)`)

func sumMetric(body, name string, labels ...string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleRE.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(m[2], l)
		}
		if v, err := strconv.ParseFloat(m[3], 64); ok && err == nil {
			sum += v
		}
	}
	return sum
}

func httpGet(url string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// haproxy is the load balancer in front, run with deploy/fleet/haproxy.cfg:
// round robin, no stickiness, each request balanced on its own; every
// answer says which replica served it (X-Served-By), and a replica is
// taken out only when its /readyz fails.
type haproxy struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
}

func startHAProxy(t *testing.T, dir string, rs []*replica) *haproxy {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy not found: apt-get install haproxy")
	}
	if len(rs) == 0 || len(rs) > 3 {
		t.Fatalf("deploy/fleet/haproxy.cfg names three servers; %d replicas do not fit", len(rs))
	}
	h := &haproxy{port: freePort(t), done: make(chan struct{}), log: &bytes.Buffer{}}
	// The operators' example itself, addresses from the environment.
	cfg := filepath.Join(repoRoot(t), "deploy", "fleet", "haproxy.cfg")
	env := append(os.Environ(), "MCPGW_LB=127.0.0.1:"+strconv.Itoa(h.port))
	for i := range 3 { // fewer replicas (the benchmark's one) fill the three servers in turn
		r := rs[i%len(rs)]
		env = append(env, fmt.Sprintf("MCPGW_R%d=127.0.0.1:%d", i+1, r.port), fmt.Sprintf("MCPGW_R%d_ADMIN_PORT=%d", i+1, r.admin))
	}
	check := exec.Command(bin, "-c", "-f", cfg)
	check.Env = env
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	h.cmd = exec.Command(bin, "-db", "-f", cfg)
	h.cmd.Env = env
	h.cmd.Stdout, h.cmd.Stderr = h.log, h.log
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.done:
		case <-time.After(5 * time.Second): // a stop that takes longer is forced: cleanup, not a check
			_ = h.cmd.Process.Kill()
			<-h.done
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Every server up (the health checks passed): the stats are not
		// served, so ask for a page through it until each replica answered.
		seen := map[string]bool{}
		for range 6 {
			req, _ := http.NewRequest(http.MethodGet, h.url(), nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				seen[resp.Header.Get("X-Served-By")] = true
				resp.Body.Close()
			}
		}
		delete(seen, "")
		if len(seen) == 3 {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not reach all 3 servers within 10s (saw %v):\n%s", seen, h.log)
		}
		time.Sleep(100 * time.Millisecond) // a poll, bounded by deadline
	}
}

func (h *haproxy) url() string { return "http://127.0.0.1:" + strconv.Itoa(h.port) + "/mcp" }
