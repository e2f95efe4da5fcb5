// Command bench measures mcpgw against the upstream called directly and
// against a transparent forwarder, in one run, alternating between them,
// everything started by itself on 127.0.0.1:
//
//	go run ./bench            # every scenario (a few minutes)
//	go run ./bench -quick     # a smoke run for CI (< 60 s)
//	go run ./bench -h         # scenarios and knobs
//
// Each process (the go-sdk echo upstream, the forwarder, mcpgw, mcpgw's
// stdio demo upstream) is this binary re-executed in a role, so /proc
// gives the middle process's own CPU time and RSS and its /stats endpoint
// its own allocation count. docs/benchmarks.md explains the columns and
// records measured numbers.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/sandbox"
)

func main() {
	sandbox.LauncherMain() // the sandboxed stdio row's launcher is this binary
	if ok, code := runRole(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(mainBench(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	scenarios  []string
	conc       []int
	sessions   []int
	modes      []string
	upstreams  []string
	targets    []string
	reps       int
	dur        time.Duration
	idle       int
	listUps    int
	listTools  int
	bigCalls   int
	bigConc    int
	bigBytes   int
	profileDir string
	keep       bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o                                     options
		scen, conc, sess, modes, ups, targets string
		quick                                 bool
	)
	fs.BoolVar(&quick, "quick", false, "a smoke run (CI): small counts and short runs, under 60 s; explicit flags still win")
	fs.StringVar(&scen, "scenarios", "call,list,idle,auth,big", "scenarios to run: call (small tools/call), list (10,000-tool tools/list), idle (idle legacy sessions), auth (JWT and a 1,000-rule CEL policy), big (1 MiB result), fleet (1 and 3 replicas, with and without Redis, the 3 behind HAProxy in http or tcp mode or no balancer process; not in the default run), tls (the small call over TLS on both sides against plain HTTP; not in the default run), intercept (the small call and the big result with a redact of 10 patterns on results against no interceptors; not in the default run)")
	fs.StringVar(&conc, "c", "1,32,256", "call: concurrencies (closed-loop workers)")
	fs.StringVar(&sess, "sessions", "1,64", "call: legacy sessions the workers share")
	fs.StringVar(&modes, "modes", "legacy,stateless", "call: legacy (2025-11-25 sessions) and/or stateless (2026-07-28 requests)")
	fs.StringVar(&ups, "upstreams", "http,stdio,stdio-raw", "call: upstream transports (stdio: the go-sdk demo server; stdio-raw: a minimal JSON-RPC echo child; stdio-sandboxed: that child in a sandbox (Linux; run a bench binary built outside /tmp); all only the mcpgw row)")
	fs.StringVar(&targets, "targets", "direct,forwarder,mcpgw", "rows to measure")
	fs.IntVar(&o.reps, "reps", 3, "alternating repetitions of every measurement")
	fs.DurationVar(&o.dur, "dur", time.Second, "call: length of one run of one target")
	fs.IntVar(&o.idle, "idle", 10000, "idle: legacy sessions to open")
	fs.IntVar(&o.listUps, "list-upstreams", 50, "list: upstreams")
	fs.IntVar(&o.listTools, "list-tools", 200, "list: tools per upstream")
	fs.IntVar(&o.bigCalls, "big-calls", 400, "big: calls of the RSS run")
	fs.IntVar(&o.bigConc, "big-c", 8, "big: concurrency of the RSS run")
	fs.IntVar(&o.bigBytes, "big-bytes", 1<<20, "big: bytes of text in the result")
	fs.StringVar(&o.profileDir, "profile", "", "write mcpgw's CPU profile of each call run (at c=1 the forwarder's too) and its allocs profile to this directory")
	fs.BoolVar(&o.keep, "keep", false, "keep the working directory (configs, child logs)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if quick { // -quick changes the defaults; flags given explicitly win
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		def := func(name, v string) {
			if !set[name] {
				_ = fs.Set(name, v)
			}
		}
		def("c", "1,32")
		def("sessions", "1")
		def("reps", "1")
		def("dur", "400ms")
		def("idle", "500")
		def("list-upstreams", "10")
		def("list-tools", "100")
		def("big-calls", "40")
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (flags only; see -h)", fs.Arg(0))
	}
	var err error
	o.scenarios, err = oneOf("scenarios", scen, "call", "list", "idle", "auth", "big", "fleet", "tls", "intercept")
	if err != nil {
		return o, err
	}
	if o.modes, err = oneOf("modes", modes, "legacy", "stateless"); err != nil {
		return o, err
	}
	if o.upstreams, err = oneOf("upstreams", ups, "http", "stdio", "stdio-raw", "stdio-sandboxed"); err != nil {
		return o, err
	}
	if o.targets, err = oneOf("targets", targets, "direct", "forwarder", "mcpgw"); err != nil {
		return o, err
	}
	if o.conc, err = ints("c", conc); err != nil {
		return o, err
	}
	if o.sessions, err = ints("sessions", sess); err != nil {
		return o, err
	}
	if o.reps < 1 || o.dur <= 0 || o.idle < 1 || o.listUps < 1 || o.listTools < 1 || o.bigCalls < 1 || o.bigConc < 1 || o.bigBytes < 1 {
		return o, fmt.Errorf("-reps, -dur, -idle, -list-upstreams, -list-tools, -big-calls, -big-c and -big-bytes must be positive")
	}
	return o, nil
}

// oneOf splits a comma list and refuses names outside allowed.
func oneOf(flagName, v string, allowed ...string) ([]string, error) {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(allowed, s) {
			return nil, fmt.Errorf("-%s: unknown %q (one or more of %s, comma-separated)", flagName, s, strings.Join(allowed, ","))
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s: empty (one or more of %s, comma-separated)", flagName, strings.Join(allowed, ","))
	}
	return out, nil
}

// ints splits a comma list of positive integers.
func ints(flagName, v string) ([]int, error) {
	var out []int
	for s := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer (write e.g. 1,32,256)", flagName, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func mainBench(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if o.profileDir != "" {
		// Made here rather than refused later: a missing directory lost every profile of a run.
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			fmt.Fprintln(stderr, "bench: -profile:", err)
			return 2
		}
	}
	dir, err := os.MkdirTemp("", "mcpgw-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if o.keep {
		fmt.Fprintln(stderr, "bench: working directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	b := &bench{o: o, dir: dir, out: stdout, log: stderr, c: newCaller()}
	defer b.stopAll()
	b.header()
	for _, s := range o.scenarios {
		var err error
		switch s {
		case "call":
			err = b.calls(ctx)
		case "list":
			err = b.list(ctx)
		case "idle":
			err = b.idleSessions(ctx)
		case "auth":
			err = b.authPolicy(ctx)
		case "big":
			err = b.big(ctx)
		case "fleet":
			err = b.fleet(ctx)
		case "tls":
			err = b.tlsCalls(ctx)
		case "intercept":
			err = b.interceptCalls(ctx)
		}
		b.stopAll()
		if err != nil {
			fmt.Fprintf(stderr, "bench: %s: %v\n", s, err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "\nload average at the end: %s\n", loadavg())
	return 0
}

// bench is one run: its options, working directory and children.
type bench struct {
	o        options
	dir      string
	out, log io.Writer
	c        *caller
	upstream *child // the echo upstream, whose accepted connections are counted
	children []*child
}

func (b *bench) start(name, role string, args ...string) (*child, error) {
	c, err := start(b.dir, name, role, args...)
	if err != nil {
		return nil, err
	}
	b.children = append(b.children, c)
	return c, nil
}

func (b *bench) stopAll() {
	b.c.closeIdle()
	for _, c := range b.children {
		c.stop()
	}
	b.children, b.upstream = nil, nil
}

func (b *bench) header() {
	fmt.Fprintf(b.out, "# mcpgw bench\n\n%s, GOMAXPROCS %d, nproc %d; load average at the start: %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), loadavg())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// writeConfig writes an mcpgw config into the working directory.
func (b *bench) writeConfig(name, yaml string) (string, error) {
	p := filepath.Join(b.dir, name)
	return p, os.WriteFile(p, []byte(yaml), 0o600)
}

func (b *bench) want(target string) bool { return slices.Contains(b.o.targets, target) }
