package client_test

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

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/sandbox"
	"github.com/mcpgw/mcpgw/internal/testwait"
	"golang.org/x/sys/unix"
)

// Real npm servers under the sandbox (internal/sandbox). The test binary
// is the launcher (TestMain runs sandbox.LauncherMain first).

func npmEntry(t testing.TB, pkg string) string {
	t.Helper()
	p, _ := filepath.Abs(filepath.Join("..", "..", "test", "interop", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not installed (npm ci in test/interop): %v", pkg, err)
	}
	return p
}

// sandboxEnv skips without the kernel features, unless
// MCPGW_REQUIRE_SANDBOX is set, and returns a world-readable directory
// outside /tmp (the sandbox's /tmp is private; a root gateway's child is
// nobody) holding a copy of the test binary to launch with.
func sandboxEnv(t testing.TB) (dir, launcher string) {
	t.Helper()
	if _, err := sandbox.Wrap(execTrue(), sandbox.Spec{Upstream: "probe", Runtime: "binary", Network: "none"}, sandbox.Options{Launcher: "/bin/true"}); errors.Is(err, sandbox.ErrUnsupported) {
		if os.Getenv("MCPGW_REQUIRE_SANDBOX") != "" {
			t.Fatalf("MCPGW_REQUIRE_SANDBOX is set but: %v", err)
		}
		t.Skipf("sandbox unavailable: %v", err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "mcpgw-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	launcher = filepath.Join(dir, "launcher")
	if err := os.WriteFile(launcher, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, launcher
}

func connectSandboxed(t *testing.T, argv []string, env map[string]string, spec sandbox.Spec, launcher string) (*client.Client, *client.Stdio) {
	t.Helper()
	spec.Upstream, spec.Runtime, spec.Network = "t", "node", "none"
	st := client.NewStdio(client.StdioConfig{
		Argv: argv, Env: env,
		Sandbox: &client.SandboxConfig{Spec: spec, Options: sandbox.Options{Launcher: launcher}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
	defer cancel()
	c, err := client.Connect(ctx, st, client.Options{})
	if err != nil {
		t.Fatalf("connect to the sandboxed %v: %v", argv, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, st
}

// callTool returns the tool's result text and whether it is an error.
func callTool(t *testing.T, c *client.Client, name string, args any) (string, bool) {
	t.Helper()
	params, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
	defer cancel()
	msg, err := c.Call(ctx, "tools/call", params, client.CallOptions{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if msg.Error != nil {
		return msg.Error.Message, true
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(msg.Result, &res); err != nil {
		t.Fatalf("%s result %s: %v", name, msg.Result, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
	}
	return b.String(), res.IsError
}

// server-filesystem is told it may serve the whole test directory, but the
// sandbox grants only data/: the kernel, not the server's own checks,
// keeps it in, whether asked by path, through .. or through a symlink.
func TestSandboxNPMFilesystemConfined(t *testing.T) {
	entry := npmEntry(t, "server-filesystem")
	dir, launcher := sandboxEnv(t)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.txt")
	for p, s := range map[string]string{filepath.Join(data, "ok.txt"): "granted", secret: "outside"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(data, "link.txt")); err != nil {
		t.Fatal(err)
	}
	c, _ := connectSandboxed(t, []string{"node", entry, dir}, nil, sandbox.Spec{ReadOnly: []string{data}}, launcher)

	if out, isErr := callTool(t, c, "read_text_file", map[string]any{"path": filepath.Join(data, "ok.txt")}); isErr || !strings.Contains(out, "granted") {
		t.Fatalf("granted file: %q (error %v)", out, isErr)
	}
	for _, p := range []string{secret, data + "/../secret.txt", filepath.Join(data, "link.txt")} {
		out, isErr := callTool(t, c, "read_text_file", map[string]any{"path": p})
		if !isErr || strings.Contains(out, "outside") {
			t.Errorf("read %s: %q (error %v), want refused", p, out, isErr)
		}
	}
	if out, isErr := callTool(t, c, "write_file", map[string]any{"path": filepath.Join(data, "new.txt"), "content": "x"}); !isErr {
		t.Errorf("write in a read-only grant: %q", out)
	}
	// Listing the directory above the grant, by .. too, is refused.
	for _, p := range []string{dir, data + "/.."} {
		if out, isErr := callTool(t, c, "list_directory", map[string]any{"path": p}); !isErr || strings.Contains(out, "secret.txt") {
			t.Errorf("list %s: %q (error %v), want refused", p, out, isErr)
		}
	}
}

// server-everything's gzip tool fetches a URL: inside the sandbox the
// connection fails, while the gateway reaches the same server.
func TestSandboxNPMNoNetwork(t *testing.T) {
	entry := npmEntry(t, "server-everything")
	_, launcher := sandboxEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "payload") }))
	defer srv.Close()
	c, _ := connectSandboxed(t, []string{"node", entry, "stdio"}, map[string]string{"GZIP_ALLOWED_DOMAINS": "127.0.0.1"}, sandbox.Spec{}, launcher)
	if out, isErr := callTool(t, c, "echo", map[string]any{"message": "hi"}); isErr || !strings.Contains(out, "hi") {
		t.Fatalf("echo: %q (error %v)", out, isErr)
	}
	out, isErr := callTool(t, c, "gzip-file-as-resource", map[string]any{"name": "x.gz", "data": srv.URL + "/x", "outputType": "resource"})
	if !isErr {
		t.Errorf("fetch from inside the sandbox succeeded: %q", out)
	}
	t.Logf("sandboxed fetch: %.200s", out)
	resp, err := http.Get(srv.URL + "/x")
	if err != nil {
		t.Fatalf("the gateway lost its network: %v", err)
	}
	resp.Body.Close()
}

// server-memory keeps its graph in the one directory granted read-write.
func TestSandboxNPMMemoryServer(t *testing.T) {
	entry := npmEntry(t, "server-memory")
	dir, launcher := sandboxEnv(t)
	store := filepath.Join(dir, "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(store, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := connectSandboxed(t, []string{"node", entry}, map[string]string{"MEMORY_FILE_PATH": filepath.Join(store, "memory.jsonl")},
		sandbox.Spec{ReadWrite: []string{store}}, launcher)
	ents := []map[string]any{{"name": "gw", "entityType": "thing", "observations": []string{"sandboxed"}}}
	if out, isErr := callTool(t, c, "create_entities", map[string]any{"entities": ents}); isErr {
		t.Fatalf("create_entities: %q", out)
	}
	if out, isErr := callTool(t, c, "read_graph", map[string]any{}); isErr || !strings.Contains(out, "sandboxed") {
		t.Fatalf("read_graph: %q (error %v)", out, isErr)
	}
	if _, err := os.Stat(filepath.Join(store, "memory.jsonl")); err != nil {
		t.Errorf("the graph was not stored in the granted directory: %v", err)
	}
}

// A node child that allocates past its memory limit is killed, and the
// error names the limit's key.
func TestSandboxNPMMemoryLimitKill(t *testing.T) {
	_, launcher := sandboxEnv(t)
	if unix.Access("/sys/fs/cgroup/memory", unix.W_OK) != nil {
		t.Skip("no writable cgroup v1 memory controller: the limit is RLIMIT_DATA, which fails allocations instead of killing")
	}
	dir := filepath.Dir(launcher)
	script := filepath.Join(dir, "hog.js")
	// A minimal stdio server: answers initialize, then allocates on its
	// first tool call until the kernel stops it.
	js := `const rl=require('readline').createInterface({input:process.stdin});const keep=[];
rl.on('line',l=>{const m=JSON.parse(l);if(m.id===undefined)return;
if(m.method==='initialize'){process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,result:{protocolVersion:m.params.protocolVersion,capabilities:{tools:{}},serverInfo:{name:'hog',version:'1'}}})+'\n');return}
if(m.method==='tools/call'){for(;;){const b=Buffer.alloc(16<<20,1);keep.push(b)}}
process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,error:{code:-32601,message:'no'}})+'\n')});`
	if err := os.WriteFile(script, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	var killed []string
	st := client.NewStdio(client.StdioConfig{
		Argv: []string{"node", script},
		Sandbox: &client.SandboxConfig{
			Spec:    sandbox.Spec{Upstream: "hog", Runtime: "node", Network: "none", MemoryBytes: 128 << 20},
			Options: sandbox.Options{Launcher: launcher},
			Killed:  func(limit string) { killed = append(killed, limit) },
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
	defer cancel()
	c, err := client.Connect(ctx, st, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Call(ctx, "tools/call", json.RawMessage(`{"name":"hog","arguments":{}}`), client.CallOptions{}) //nolint:errcheck // the child dies under it
	select {
	case <-c.Done():
	case <-time.After(testwait.Long): // the failure's deadline, not a wait
		t.Fatal("the child outlived its memory limit")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "sandbox.memory") {
		t.Fatalf("exit error %v, want the limit named (upstreams.hog.sandbox.memory)", err)
	}
	if fmt.Sprint(killed) != "[memory]" {
		t.Errorf("Killed saw %v, want [memory]", killed)
	}
}

// A sandboxed child's stderr lines reporting a permission error are
// passed on to be counted: the kernel refuses the child's accesses
// without telling the gateway, but the child's report of them is seen.
func TestSandboxDeniedLinesCounted(t *testing.T) {
	_, launcher := sandboxEnv(t)
	dir := filepath.Dir(launcher)
	script := filepath.Join(dir, "peek.js")
	// Tries a file outside its grants at start and says why it failed,
	// as a server would; then answers initialize.
	js := `try{require('fs').readFileSync('/etc/shadow')}catch(e){console.error(e.message)}
console.error('starting up');
const rl=require('readline').createInterface({input:process.stdin});
rl.on('line',l=>{const m=JSON.parse(l);if(m.id===undefined)return;
if(m.method==='initialize'){process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,result:{protocolVersion:m.params.protocolVersion,capabilities:{},serverInfo:{name:'peek',version:'1'}}})+'\n');return}
process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,error:{code:-32601,message:'no'}})+'\n')});`
	if err := os.WriteFile(script, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4)
	st := client.NewStdio(client.StdioConfig{
		Argv: []string{"node", script},
		Sandbox: &client.SandboxConfig{
			Spec:       sandbox.Spec{Upstream: "peek", Runtime: "node", Network: "none"},
			Options:    sandbox.Options{Launcher: launcher},
			DeniedLine: func(l string) { lines <- l },
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
	defer cancel()
	c, err := client.Connect(ctx, st, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if l := testwait.Recv(t, lines, "the denied read reported"); !strings.Contains(l, "EACCES") || !strings.Contains(l, "/etc/shadow") {
		t.Errorf("denied line %q, want the EACCES of /etc/shadow", l)
	}
	c.Close()
	select {
	case l := <-lines:
		t.Errorf("a line without a permission error counted: %q", l)
	default:
	}
}

// The cost of a sandbox to a real server's start: server-memory from
// spawn to its initialize answer, plain and sandboxed.
//
//	go test -run '^$' -bench SandboxNPMConnect -benchtime 10x ./internal/client
func BenchmarkSandboxNPMConnect(b *testing.B) {
	entry := npmEntry(b, "server-memory")
	dir, launcher := sandboxEnv(b)
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			b.Fatal(err)
		}
	}
	env := map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}
	for _, mode := range []string{"plain", "sandboxed"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cfg := client.StdioConfig{Argv: []string{"node", entry}, Env: env}
				if mode == "sandboxed" {
					cfg.Sandbox = &client.SandboxConfig{
						Spec:    sandbox.Spec{Upstream: "m", Runtime: "node", Network: "none", ReadWrite: []string{dir}},
						Options: sandbox.Options{Launcher: launcher},
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), testwait.Long)
				c, err := client.Connect(ctx, client.NewStdio(cfg), client.Options{Protocol: "legacy"})
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer() // the stop is not the start's cost
				c.Close()
				b.StartTimer()
			}
		})
	}
}

func execTrue() *exec.Cmd { return exec.Command("/bin/true") }
