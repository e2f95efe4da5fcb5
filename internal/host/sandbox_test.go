package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/sandbox"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"golang.org/x/sys/unix"
)

// hogJS is a minimal stdio server that allocates without end on a tool
// call, until the kernel stops it.
const hogJS = `const rl=require('readline').createInterface({input:process.stdin});const keep=[];
rl.on('line',l=>{const m=JSON.parse(l);if(m.id===undefined)return;
if(m.method==='initialize'){process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,result:{protocolVersion:m.params.protocolVersion,capabilities:{tools:{}},serverInfo:{name:'hog',version:'1'}}})+'\n');return}
if(m.method==='tools/call'){for(;;){keep.push(Buffer.alloc(16<<20,1))}}
process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,error:{code:-32601,message:'no'}})+'\n')});`

// A sandboxed child killed by its memory limit is reported naming the
// limit (log, status, metric) and restarted in a fresh sandbox.
func TestSandboxMemoryKillRestarts(t *testing.T) {
	if _, err := sandbox.Wrap(exec.Command("/bin/true"), sandbox.Spec{Upstream: "probe", Runtime: "binary", Network: "none"}, sandbox.Options{Launcher: "/bin/true"}); errors.Is(err, sandbox.ErrUnsupported) {
		if os.Getenv("MCPGW_REQUIRE_SANDBOX") != "" {
			t.Fatalf("MCPGW_REQUIRE_SANDBOX is set but: %v", err)
		}
		t.Skipf("sandbox unavailable: %v", err)
	}
	if unix.Access("/sys/fs/cgroup/memory", unix.W_OK) != nil {
		t.Skip("no writable cgroup v1 memory controller: the limit is RLIMIT_DATA, which fails allocations instead of killing")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	// Outside /tmp (the sandbox's is private) and enterable by nobody (a
	// root gateway's children run as nobody): the launcher and the script.
	dir, err := os.MkdirTemp("/var/tmp", "mcpgw-host-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	launcher, script := filepath.Join(dir, "launcher"), filepath.Join(dir, "hog.js")
	if err := os.WriteFile(launcher, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(hogJS), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("upstreams:\n  hog:\n    command: [%q, %q]\n    protocol: legacy\n    sandbox: {memory: 128MiB}\n", node, script)
	cfg, err := config.Parse("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	log, logs := teeLogger(t)
	h := host.New(cfg, host.Options{
		Logger: log, Metrics: metrics.New(reg, metrics.Options{NoRuntimeCollectors: true}),
		SandboxLauncher: launcher, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
	})
	h.Start()
	defer h.Close()
	u := h.Upstream("hog")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
	defer cancel()
	c, err := u.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := u.Status(); !strings.Contains(st.Sandbox, "memory=128MiB(cgroup)") {
		t.Errorf("status sandbox = %q, want the memory limit and its mechanism", st.Sandbox)
	}
	go c.Call(ctx, "tools/call", json.RawMessage(`{"name":"hog","arguments":{}}`), client.CallOptions{}) //nolint:errcheck // the child dies under it
	waitFor(t, testwait.Long, "the kill to be reported and the child restarted", func() bool {
		st := u.Status()
		return st.SandboxKills >= 1 && st.State == host.StateReady && st.Restarts >= 1
	})
	named := false
	for _, e := range logs.All() {
		if s, ok := e.ContextMap()["error"].(string); ok && strings.Contains(s, "upstreams.hog.sandbox.memory = 128MiB") {
			named = true
		}
	}
	if !named {
		t.Error("no logged error names upstreams.hog.sandbox.memory")
	}
	if n := sandboxEvents(t, reg, "killed_memory"); n != 1 {
		t.Errorf("killed_memory events = %v, want 1", n)
	}
}

// sandboxEvents reads mcpgw_upstream_sandbox_events_total of upstream
// hog for event.
func sandboxEvents(t *testing.T, reg *prometheus.Registry, event string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcpgw_upstream_sandbox_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["upstream"] == "hog" && labels["event"] == event {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
