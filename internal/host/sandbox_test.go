package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// fetchJS is a minimal stdio server whose tool "fetch" opens a tunnel
// through the proxy its environment names (HTTPS_PROXY) and answers with
// what came back: the way out of a sandbox with network egress.
const fetchJS = `try{require('fs').readFileSync('/etc/shadow')}catch(e){console.error(e.message)}
const net=require('net');const rl=require('readline').createInterface({input:process.stdin});
const out=(id,r)=>process.stdout.write(JSON.stringify({jsonrpc:'2.0',id,result:r})+'\n');
rl.on('line',l=>{const m=JSON.parse(l);if(m.id===undefined)return;
if(m.method==='initialize'){out(m.id,{protocolVersion:m.params.protocolVersion,capabilities:{tools:{}},serverInfo:{name:'fetch',version:'1'}});return}
if(m.method==='tools/call'){const t=m.params.arguments.target;const p=new URL(process.env.HTTPS_PROXY);
const s=net.connect(+p.port,p.hostname,()=>s.write('CONNECT '+t+' HTTP/1.1\r\nHost: '+t+'\r\n\r\nGET /x HTTP/1.1\r\nHost: '+t+'\r\nConnection: close\r\n\r\n'));
let b='';s.on('data',d=>b+=d);s.on('error',e=>b+='error: '+e.message);s.on('close',()=>out(m.id,{content:[{type:'text',text:b}]}));return}
process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,error:{code:-32601,message:'no'}})+'\n')});`

// A sandboxed upstream with network egress reaches its listed host and
// no other; the refusal is counted (metric, status) and logged. The
// permission error the child reports on stderr is counted too.
func TestSandboxEgressUpstream(t *testing.T) {
	if _, err := sandbox.Wrap(exec.Command("/bin/true"), sandbox.Spec{Upstream: "probe", Runtime: "binary", Network: "none"}, sandbox.Options{Launcher: "/bin/true"}); errors.Is(err, sandbox.ErrUnsupported) {
		if os.Getenv("MCPGW_REQUIRE_SANDBOX") != "" {
			t.Fatalf("MCPGW_REQUIRE_SANDBOX is set but: %v", err)
		}
		t.Skipf("sandbox unavailable: %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer other.Close()
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
	launcher, script := filepath.Join(dir, "launcher"), filepath.Join(dir, "fetch.js")
	if err := os.WriteFile(launcher, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(fetchJS), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("upstreams:\n  web:\n    command: [%q, %q]\n    protocol: legacy\n    sandbox: {egress: [%q]}\n", node, script, srv.Listener.Addr().String())
	cfg, err := config.Parse("test.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	log, logs := teeLogger(t)
	h := host.New(cfg, host.Options{
		Logger: log, Metrics: metrics.New(reg, metrics.Options{NoRuntimeCollectors: true}), SandboxLauncher: launcher,
	})
	h.Start()
	defer h.Close()
	u := h.Upstream("web")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
	defer cancel()
	c, err := u.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(target string) string {
		t.Helper()
		res, err := c.Call(ctx, "tools/call", json.RawMessage(fmt.Sprintf(`{"name":"fetch","arguments":{"target":%q}}`, target)), client.CallOptions{})
		if err != nil {
			t.Fatalf("fetch %s: %v", target, err)
		}
		return string(res.Result)
	}
	if out := fetch(srv.Listener.Addr().String()); !strings.Contains(out, "hello /x") {
		t.Errorf("listed host: %s", out)
	}
	if out := fetch(other.Listener.Addr().String()); !strings.Contains(out, "403 Forbidden") {
		t.Errorf("host not listed: %s, want 403", out)
	}
	if n := metricValue(t, reg, "mcpgw_sandbox_egress_connections_total", "result", "denied"); n != 1 {
		t.Errorf("denied connections = %v, want 1", n)
	}
	if n := metricValue(t, reg, "mcpgw_sandbox_egress_connections_total", "result", "allowed"); n != 1 {
		t.Errorf("allowed connections = %v, want 1", n)
	}
	if n := metricValue(t, reg, "mcpgw_sandbox_egress_bytes_total", "direction", "received"); n <= 0 {
		t.Errorf("received bytes = %v, want > 0", n)
	}
	waitFor(t, testwait.Long, "the child's reported permission error counted", func() bool {
		return strings.Contains(u.Status().Sandbox, "denials_reported=1")
	})
	if n := metricValue(t, reg, "mcpgw_upstream_sandbox_events_total", "event", "denied_reported"); n != 1 {
		t.Errorf("denied_reported events = %v, want 1", n)
	}
	st := u.Status()
	if !strings.Contains(st.Sandbox, "network=egress(1 hosts)") || !strings.Contains(st.Sandbox, "egress_denied=1 (last "+other.Listener.Addr().String()+")") {
		t.Errorf("status sandbox = %q, want the egress mode and the denial", st.Sandbox)
	}
	logged := false
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "sandbox egress refused") && e.ContextMap()["target"] == other.Listener.Addr().String() {
			logged = true
		}
	}
	if !logged {
		t.Error("the refusal was not logged with its target")
	}
	// The gateway's own network is untouched.
	resp, err := http.Get(other.URL)
	if err != nil {
		t.Fatalf("gateway lost its network: %v", err)
	}
	resp.Body.Close()
}

// metricValue reads a metric of upstream web by one more label.
func metricValue(t *testing.T, reg *prometheus.Registry, name, key, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["upstream"] == "web" && labels[key] == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
