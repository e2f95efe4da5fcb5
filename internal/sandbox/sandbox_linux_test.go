package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgw/mcpgw/internal/sandbox"
)

// The test binary doubles as the launcher and as the sandboxed child:
// SANDBOX_TEST_CHILD names what the child does.
func TestMain(m *testing.M) {
	sandbox.LauncherMain()
	if act := os.Getenv("SANDBOX_TEST_CHILD"); act != "" {
		os.Exit(child(act))
	}
	os.Exit(m.Run())
}

func child(act string) int {
	verb, arg, _ := strings.Cut(act, " ")
	switch verb {
	case "read":
		b, err := os.ReadFile(arg)
		if err != nil {
			fmt.Println("denied:", err)
			return 0
		}
		fmt.Printf("read %d bytes\n", len(b))
	case "write":
		if err := os.WriteFile(arg, []byte("x"), 0o644); err != nil {
			fmt.Println("denied:", err)
			return 0
		}
		fmt.Println("wrote")
	case "connect":
		c, err := net.Dial("tcp", arg)
		if err != nil {
			fmt.Println("denied:", err)
			return 0
		}
		c.Close()
		fmt.Println("connected")
	case "proxy":
		// proxy connect HOST:PORT | proxy get URL: one request through
		// the proxy the environment names, printing the answer.
		mode, target, _ := strings.Cut(arg, " ")
		u, err := url.Parse(os.Getenv("HTTPS_PROXY"))
		if err != nil || u.Host == "" {
			fmt.Println("no proxy in the environment:", os.Getenv("HTTPS_PROXY"))
			return 0
		}
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			fmt.Println("denied:", err)
			return 0
		}
		defer c.Close()
		if mode == "connect" {
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET /via-connect HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, target, target)
		} else {
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target)
		}
		b, _ := io.ReadAll(c)
		fmt.Printf("%s", b)
	case "alloc":
		var keep [][]byte
		for i := 0; i < 4096; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep))
	case "id":
		st, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "Uid:") || strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "NoNewPrivs:") {
				fmt.Println(l)
			}
		}
	}
	return 0
}

// need skips when the kernel lacks what sandboxing uses, unless
// MCPGW_REQUIRE_SANDBOX says the machine must have it.
func need(t testing.TB) {
	t.Helper()
	cmd := exec.Command("/bin/true")
	_, err := sandbox.Wrap(cmd, sandbox.Spec{Upstream: "probe", Runtime: "binary", Network: "none"}, sandbox.Options{Launcher: "/bin/true"})
	if errors.Is(err, sandbox.ErrUnsupported) {
		if os.Getenv("MCPGW_REQUIRE_SANDBOX") != "" {
			t.Fatalf("MCPGW_REQUIRE_SANDBOX is set but: %v", err)
		}
		t.Skipf("sandbox unavailable: %v", err)
	}
}

// worldDir is a directory the child's unprivileged id can enter (a root
// gateway's children run as nobody; t.TempDir is 0700).
func worldDir(t testing.TB) string {
	t.Helper()
	// Not under /tmp: the sandbox's private /tmp would hide it.
	d, err := os.MkdirTemp("/var/tmp", "sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// selfCopy is the test binary where nobody can exec it.
func selfCopy(t testing.TB, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "bin", "sandbox.test")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type env struct {
	dir, bin, data, secret string
}

func setup(t testing.TB) env {
	need(t)
	d := worldDir(t)
	e := env{dir: d, bin: selfCopy(t, d), data: filepath.Join(d, "data"), secret: filepath.Join(d, "secret.txt")}
	if err := os.Mkdir(e.data, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, s := range map[string]string{filepath.Join(e.data, "ok.txt"): "fine", e.secret: "secret"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func runIn(t *testing.T, e env, spec sandbox.Spec, act string) (string, *sandbox.Run, error) {
	t.Helper()
	cmd := exec.Command(e.bin)
	cmd.Env = []string{"SANDBOX_TEST_CHILD=" + act}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if spec.Upstream == "" {
		spec.Upstream = "t"
	}
	if spec.Runtime == "" {
		spec.Runtime = "binary"
	}
	if spec.Network == "" {
		spec.Network = "none"
	}
	run, err := sandbox.Wrap(cmd, spec, sandbox.Options{Launcher: e.bin})
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	err = cmd.Run()
	return out.String(), run, err
}

func TestSandboxFilesystemOnlyGranted(t *testing.T) {
	e := setup(t)
	spec := sandbox.Spec{ReadOnly: []string{e.data}}
	for act, want := range map[string]string{
		"read " + filepath.Join(e.data, "ok.txt"):   "read 4 bytes",
		"read " + e.secret:                          "denied",
		"read " + e.data + "/../secret.txt":         "denied",
		"write " + filepath.Join(e.data, "new.txt"): "denied",
		"read /etc/shadow":                          "denied",
		"write /tmp/scratch":                        "wrote", // the private /tmp
	} {
		out, run, err := runIn(t, e, spec, act)
		run.Exited()
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: got %q (%v), want %q", act, out, err, want)
		}
	}
	// A symlink inside the granted directory does not reach outside it.
	link := filepath.Join(e.data, "link")
	if err := os.Symlink(e.secret, link); err != nil {
		t.Fatal(err)
	}
	out, run, _ := runIn(t, e, spec, "read "+link)
	run.Exited()
	if !strings.Contains(out, "denied") {
		t.Errorf("read through a symlink: %q, want denied", out)
	}
	if _, err := os.Stat("/tmp/scratch"); err == nil {
		t.Errorf("the child's /tmp/scratch reached the host's /tmp")
	}
}

func TestSandboxReadWriteGrant(t *testing.T) {
	e := setup(t)
	if os.Geteuid() == 0 {
		// The child runs as nobody: the directory must be its to write.
		if err := os.Chown(e.data, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	out, run, err := runIn(t, e, sandbox.Spec{ReadWrite: []string{e.data}}, "write "+filepath.Join(e.data, "new.txt"))
	run.Exited()
	if err != nil || !strings.Contains(out, "wrote") {
		t.Fatalf("write in a read_write grant: %q (%v)", out, err)
	}
}

func TestSandboxNoNetwork(t *testing.T) {
	e := setup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hi") }))
	defer srv.Close()
	out, run, err := runIn(t, e, sandbox.Spec{}, "connect "+srv.Listener.Addr().String())
	run.Exited()
	if err != nil || !strings.Contains(out, "denied") {
		t.Fatalf("connect from the sandbox: %q (%v), want denied", out, err)
	}
	// The gateway's own network is untouched.
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatalf("gateway lost its network: %v", err)
	}
	resp.Body.Close()
}

func TestSandboxPrivileges(t *testing.T) {
	e := setup(t)
	out, run, err := runIn(t, e, sandbox.Spec{}, "id")
	run.Exited()
	if err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if !strings.Contains(out, "CapEff:\t0000000000000000") || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Errorf("child has privileges: %q", out)
	}
}

func TestSandboxMemoryLimitNamed(t *testing.T) {
	e := setup(t)
	spec := sandbox.Spec{Upstream: "hog", MemoryBytes: 64 << 20}
	out, run, err := runIn(t, e, spec, "alloc")
	reason := run.Exited()
	if err == nil {
		t.Fatalf("child allocating 4 GiB under a 64 MiB limit exited cleanly: %q", out)
	}
	if !strings.Contains(reason, "sandbox.memory") {
		t.Fatalf("exit %v explained as %q, want the limit named", err, reason)
	}
	t.Logf("%v%s (%s)", err, reason, run.Describe())
}

// Cgroups left by a gateway that died without stopping its children are
// removed when the next child's are made; a live gateway's are kept.
func TestSandboxSweepsStaleCgroups(t *testing.T) {
	need(t)
	root := t.TempDir()
	parent := filepath.Join(root, "memory", "mcpgw")
	stale := filepath.Join(parent, fmt.Sprintf("up-%d-ab", 1<<22+12345)) // above pid_max's default
	live := filepath.Join(parent, fmt.Sprintf("up-%d-cd", os.Getppid()))
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "memory", "cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := sandbox.Wrap(exec.Command("/bin/true"), sandbox.Spec{Upstream: "up", Runtime: "binary", Network: "none", MemoryBytes: 64 << 20},
		sandbox.Options{Launcher: "/bin/true", CgroupRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Exited()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale cgroup of a dead gateway kept (%v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live gateway's cgroup was removed: %v", err)
	}
}

// An egress child reaches the listed host through the gateway's proxy
// (the address, or a name the gateway resolves), nothing else: another
// host is refused and counted, a direct connection fails, and the
// gateway's own network is untouched.
func TestSandboxEgressAllowlist(t *testing.T) {
	e := setup(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "hello from "+r.URL.Path)
	}))
	defer srv.Close()
	var otherHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	addr := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)

	var mu sync.Mutex
	results := map[string]int{}
	var sent, received int64
	var denied []string
	opt := sandbox.Options{Launcher: e.bin, Egress: sandbox.EgressHooks{
		Result: func(r string) { mu.Lock(); results[r]++; mu.Unlock() },
		Bytes:  func(s, r int64) { mu.Lock(); sent += s; received += r; mu.Unlock() },
		Denied: func(target string) { mu.Lock(); denied = append(denied, target); mu.Unlock() },
	}}
	spec := sandbox.Spec{Upstream: "web", Runtime: "binary", Network: "egress", Egress: []string{addr, "localhost:" + port}}
	run := func(act string) string {
		t.Helper()
		cmd := exec.Command(e.bin)
		cmd.Env = []string{"SANDBOX_TEST_CHILD=" + act}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		r, err := sandbox.Wrap(cmd, spec, opt)
		if err != nil {
			t.Fatalf("Wrap: %v", err)
		}
		if !strings.Contains(r.Describe(), "network=egress(2 hosts)") {
			t.Errorf("described as %q", r.Describe())
		}
		if err := cmd.Start(); err != nil {
			r.Exited()
			t.Fatal(err)
		}
		r.Started()
		err = cmd.Wait()
		r.Exited()
		if err != nil {
			t.Fatalf("%s: %v: %s", act, err, out.String())
		}
		return out.String()
	}

	if out := run("proxy connect " + addr); !strings.Contains(out, "hello from /via-connect") {
		t.Errorf("CONNECT to the listed host: %q", out)
	}
	// The child has no DNS: the name is resolved by the gateway.
	if out := run("proxy get http://localhost:" + port + "/by-name"); !strings.Contains(out, "hello from /by-name") {
		t.Errorf("GET by name through the proxy: %q", out)
	}
	if out := run("proxy connect " + other.Listener.Addr().String()); !strings.Contains(out, "403 Forbidden") {
		t.Errorf("CONNECT to a host not listed: %q, want 403", out)
	}
	if out := run("proxy connect example.com:443"); !strings.Contains(out, "403 Forbidden") {
		t.Errorf("CONNECT to a name not listed: %q, want 403", out)
	}
	// Past the proxy there is no way out: the namespace has loopback only.
	if out := run("connect " + addr); !strings.Contains(out, "denied") {
		t.Errorf("direct connect from an egress child: %q, want denied", out)
	} else {
		t.Logf("direct connect: %s", strings.TrimSpace(out))
	}
	if otherHits.Load() != 0 || hits.Load() != 2 {
		t.Errorf("listed server saw %d requests (want 2), the other %d (want 0)", hits.Load(), otherHits.Load())
	}
	mu.Lock()
	if results[sandbox.EgressAllowed] != 2 || results[sandbox.EgressDenied] != 2 || len(denied) != 2 {
		t.Errorf("results %v, denied %v; want 2 allowed, 2 denied", results, denied)
	}
	if sent == 0 || received == 0 {
		t.Errorf("bytes not counted: sent %d received %d", sent, received)
	}
	mu.Unlock()
	resp, err := http.Get(other.URL)
	if err != nil {
		t.Fatalf("gateway lost its network: %v", err)
	}
	resp.Body.Close()
}

// The cost of a sandbox at start: the same child (the test binary, which
// exits at once) started plain, sandboxed, and sandboxed with egress
// (the proxy socket made and handed over), to its exit.
//
//	go test -run '^$' -bench ChildStart -benchtime 30x ./internal/sandbox
func BenchmarkChildStart(b *testing.B) {
	e := setup(b)
	for _, mode := range []string{"plain", "none", "egress"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cmd := exec.Command(e.bin)
				cmd.Env = []string{"SANDBOX_TEST_CHILD=nop"}
				var run *sandbox.Run
				if mode != "plain" {
					spec := sandbox.Spec{Upstream: "b", Runtime: "binary", Network: mode}
					if mode == "egress" {
						spec.Egress = []string{"127.0.0.1:9"}
					}
					var err error
					if run, err = sandbox.Wrap(cmd, spec, sandbox.Options{Launcher: e.bin}); err != nil {
						b.Fatal(err)
					}
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				run.Started()
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				run.Exited()
			}
		})
	}
}

// A project under /tmp (a checkout there, its node_modules): its granted
// paths are bound into the child's private /tmp at their own place, the
// binary too; what is not granted stays out of sight.
func TestSandboxGrantUnderTmp(t *testing.T) {
	need(t)
	d, err := os.MkdirTemp("/tmp", "sandbox-under-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	e := env{dir: d, bin: selfCopy(t, d), data: filepath.Join(d, "data"), secret: filepath.Join(d, "secret.txt")}
	if err := os.Mkdir(e.data, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, s := range map[string]string{filepath.Join(e.data, "ok.txt"): "fine", e.secret: "secret"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := sandbox.Spec{ReadOnly: []string{e.data}}
	for act, want := range map[string]string{
		"read " + filepath.Join(e.data, "ok.txt"):   "read 4 bytes",
		"read " + e.secret:                          "denied", // beside the grant, not bound
		"write " + filepath.Join(e.data, "new.txt"): "denied",
		"write /tmp/scratch":                        "wrote",
	} {
		out, run, err := runIn(t, e, spec, act)
		run.Exited()
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: got %q (%v), want %q", act, out, err, want)
		}
	}
}
