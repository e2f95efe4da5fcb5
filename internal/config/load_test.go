package config_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/configs"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// parseAll and loadAll are config.Parse and config.Load with the checks
// the CLI passes (policy.CheckConfig), so that the bad files show every
// problem `mcpgw validate` reports.
func parseAll(name string, data []byte, env func(string) (string, bool)) (*config.Config, error) {
	return config.Parse(name, data, env, policy.CheckConfig)
}

func loadAll(path string, env func(string) (string, bool)) (*config.Config, error) {
	return config.Load(path, env, policy.CheckConfig)
}

// envOf returns an env lookup over a fixed map, like os.LookupEnv.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// testEnv is the environment the testdata files are parsed with.
// GITHUB_TOKEN is left unset for unset-env.bad.yaml; goodEnv sets it.
var (
	testEnv = envOf(map[string]string{"SET_VAR": "v1", "TOKEN": "t0k3n"})
	goodEnv = envOf(map[string]string{"SET_VAR": "v1", "TOKEN": "t0k3n", "GITHUB_TOKEN": "ghp_test"})
)

// wants returns the "# want: <substring>" lines from a file's leading comments.
func wants(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if w, ok := strings.CutPrefix(line, "# want: "); ok {
			out = append(out, w)
		}
	}
	return out
}

func mustParse(t *testing.T, src string, env func(string) (string, bool)) *config.Config {
	t.Helper()
	c, err := parseAll("test.yaml", []byte(src), env)
	if err != nil {
		t.Fatalf("Parse: unexpected problems:\n%v", err)
	}
	return c
}

func parseProblems(t *testing.T, src string, env func(string) (string, bool)) config.Problems {
	t.Helper()
	_, err := parseAll("test.yaml", []byte(src), env)
	var ps config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse error = %v (%T), want config.Problems", err, err)
	}
	return ps
}

func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.bad.yaml")
	if err != nil || len(files) < 15 {
		t.Fatalf("want at least 15 bad files, got %d (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := wants(data)
			if len(want) == 0 {
				t.Fatal(`file has no leading "# want: <substring>" line`)
			}
			cfg, err := parseAll(filepath.Base(file), data, testEnv)
			if err == nil {
				t.Fatalf("Parse succeeded (%s), want problems", cfg.Summary())
			}
			var ps config.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("error is %T, want config.Problems: %v", err, err)
			}
			msg := err.Error()
			for _, w := range want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q", w)
				}
			}
			if len(ps) < len(want) {
				t.Errorf("got %d problems, want at least %d (one per want line)", len(ps), len(want))
			}
			for _, p := range ps {
				// Every message says what is wrong and, after a ";", the fix.
				if !strings.Contains(p.Msg, "; ") {
					t.Errorf("problem without a fix: %s", p)
				}
				if p.Line == 0 && p.Path != "upstreams" {
					t.Errorf("problem without a line number: %s", p)
				}
			}
			if t.Failed() {
				t.Logf("full error:\n%s", msg)
			}
		})
	}
}

func TestGoodFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.yaml")
	if len(files) == 0 {
		t.Fatal("no good files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			if _, err := loadAll(file, goodEnv); err != nil {
				t.Fatalf("Load: %v", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, `
upstreams:
  fs: {command: [node, server.js]}
  github: {url: "https://api.example.com/mcp"}
`, nil)
	if c.Listen != "127.0.0.1:8080" {
		t.Errorf("Listen = %q", c.Listen)
	}
	if c.Separator != config.DefaultSeparator {
		t.Errorf("Separator = %q", c.Separator)
	}
	if c.MaxBodyBytes != 4<<20 {
		t.Errorf("MaxBodyBytes = %d", c.MaxBodyBytes)
	}
	for name, u := range c.Upstreams {
		if u.Timeout.D() != 60*time.Second || u.StartupTimeout.D() != 30*time.Second || u.MaxLineBytes != 8<<20 || u.StartupListWait.D() != 2*time.Second {
			t.Errorf("%s: timeout %v, startup %v, max line %d, list wait %v", name, u.Timeout, u.StartupTimeout, u.MaxLineBytes, u.StartupListWait)
		}
	}
	wantStderr := config.Stderr{Level: "info", Rate: config.Rate{N: 10, Per: time.Second}, Burst: 100, MaxLineBytes: 4096}
	if s := c.Upstreams["fs"].Stderr; s == nil || *s != wantStderr {
		t.Errorf("fs stderr = %+v, want %+v", s, wantStderr)
	}
	if s := c.Upstreams["github"].Stderr; s != nil {
		t.Errorf("github (a url upstream) has stderr settings %+v", s)
	}
	if got := c.Upstreams["fs"].Transport; got != "stdio" {
		t.Errorf("fs transport = %q, want stdio", got)
	}
	if got := c.Upstreams["github"].Transport; got != "streamable" {
		t.Errorf("github transport = %q, want streamable", got)
	}
	if len(c.Routes) != 1 || c.Routes[0].Path != "/mcp" || len(c.Routes[0].Upstreams) != 0 || !c.Routes[0].Prefixed() {
		t.Errorf("Routes = %+v, want one prefixed /mcp route with all upstreams", c.Routes)
	}
	if r := c.Routes[0]; c.PageSize != config.DefaultPageSize || r.PageSize != config.DefaultPageSize || !r.BareNamesEnabled() {
		t.Errorf("page size %d (route %d), bare names %v; want %d and bare names on", c.PageSize, r.PageSize, r.BareNamesEnabled(), config.DefaultPageSize)
	}
	if c.Policy == nil || c.Policy.Default != "allow" || len(c.Policy.Rules) != 0 {
		t.Errorf("Policy = %+v, want default allow", c.Policy)
	}
	if c.Auth != nil || c.Admin != nil {
		t.Errorf("absent sections should stay nil: auth %v admin %v", c.Auth, c.Admin)
	}
	// sessions: always carries its bounds (limits.go).
	wantSessions := config.Sessions{
		MaxSessions: 10000, MaxSessionsPerPrincipal: 1000, MaxRequestsPerSession: 128, MaxReplayStreams: 16,
		SSEQueue: 256, SSEWriteTimeout: config.Duration(30 * time.Second), PrimingHold: config.Duration(50 * time.Millisecond),
		MaxParkedCalls: 256, MaxParkedCallsPerPrincipal: 32,
		QueueBytes: 16 << 20, QueueTotalBytes: 256 << 20,
		MaxSubscriptionsPerSession: 1000, MaxSubscriptionsPerPrincipal: 10000, MaxListenStreamsPerPrincipal: 100, MaxSubscriptionURIBytes: 8192,
	}
	if c.Sessions == nil || !reflect.DeepEqual(*c.Sessions, wantSessions) {
		t.Errorf("sessions = %+v, want the default bounds %+v", c.Sessions, wantSessions)
	}
	if c.ReadHeaderTimeout.D() != 10*time.Second || c.ReadBodyTimeout.D() != 30*time.Second {
		t.Errorf("read timeouts: header %v, body %v; want 10s and 30s", c.ReadHeaderTimeout, c.ReadBodyTimeout)
	}
	for name, u := range c.Upstreams {
		if u.MaxSessions != 64 || u.MaxSessionsPerPrincipal != 16 {
			t.Errorf("%s: stateful bounds %d / %d per principal, want 64 / 16", name, u.MaxSessions, u.MaxSessionsPerPrincipal)
		}
	}
}

func TestEmptyValuesMeanDefaults(t *testing.T) {
	c, err := loadAll("testdata/empty-values.good.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != config.DefaultListen || c.Separator != config.DefaultSeparator || c.Upstreams["fs"].Timeout.D() != config.DefaultTimeout ||
		len(c.Routes) != 1 || c.Policy.Default != "allow" || c.Auth != nil {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestEveryField(t *testing.T) {
	c, err := loadAll("testdata/full.good.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Config{
		Listen:            "0.0.0.0:8443",
		PublicURL:         "https://mcp.example.com",
		AllowedOrigins:    []string{"https://app.example.com", "http://localhost:5173"},
		Separator:         ".",
		MaxBodyBytes:      1 << 20,
		ReadHeaderTimeout: config.Duration(5 * time.Second),
		ReadBodyTimeout:   config.Duration(time.Minute),
		PageSize:          5000,
		Upstreams: map[string]*config.Upstream{
			"github": {
				URL:                      "https://api.example.com/mcp/",
				Transport:                "sse",
				Headers:                  map[string]string{"Authorization": "Bearer t0k3n", "X-Price": "$5"},
				Timeout:                  config.Duration(90 * time.Second),
				StartupTimeout:           config.Duration(5 * time.Second),
				StartupListWait:          config.Duration(time.Second),
				Stateful:                 false,
				MaxLineBytes:             config.DefaultMaxLineBytes,
				MaxSessions:              config.DefaultMaxStatefulSessions,
				MaxSessionsPerPrincipal:  config.DefaultMaxStatefulSessionsPerPrincipal,
				MaxServerRequests:        config.DefaultMaxServerRequests,
				MaxServerRequestsPerCall: config.DefaultMaxServerRequestsPerCall,
				InteractivePool:          config.DefaultInteractivePool,
			},
			"gitlab": {
				URL:                      "https://gitlab.example.com/mcp",
				Transport:                "streamable",
				Headers:                  map[string]string{"Authorization": "Bearer t0k3n", "X-Price": "$5"},
				Timeout:                  config.Duration(90 * time.Second),
				StartupTimeout:           config.Duration(5 * time.Second),
				StartupListWait:          config.Duration(time.Second), // merged from github
				Stateful:                 false,
				MaxLineBytes:             config.DefaultMaxLineBytes,
				MaxSessions:              config.DefaultMaxStatefulSessions,
				MaxSessionsPerPrincipal:  config.DefaultMaxStatefulSessionsPerPrincipal,
				MaxServerRequests:        config.DefaultMaxServerRequests,
				MaxServerRequestsPerCall: config.DefaultMaxServerRequestsPerCall,
				InteractivePool:          config.DefaultInteractivePool,
			},
			"fs": {
				Command:                  []string{"node", "server-filesystem.js", "/data"},
				Transport:                "stdio",
				Env:                      map[string]string{"LOG_LEVEL": "info", "EMPTY": ""},
				Dir:                      "/srv",
				Timeout:                  config.Duration(10 * time.Second),
				StartupTimeout:           config.Duration(2 * time.Minute),
				StartupListWait:          config.Duration(config.DefaultStartupListWait),
				MaxLineBytes:             1024,
				Stateful:                 true,
				MaxSessions:              8,
				MaxSessionsPerPrincipal:  2,
				MaxServerRequests:        32,
				MaxServerRequestsPerCall: 4,
				InteractivePool:          config.DefaultInteractivePool,
				Stderr:                   &config.Stderr{Level: "debug", Rate: config.Rate{N: 5, Per: time.Second}, Burst: 20, MaxLineBytes: 1000},
			},
		},
		Routes: []*config.Route{
			{Path: "/", PageSize: 5000},
			{Path: "/mcp/fs", Upstreams: []string{"fs"}, Prefix: new(false), PageSize: 5000},
			{Path: "/mcp/code", Upstreams: []string{"gitlab", "github"}, Prefix: new(true), PageSize: 200, BareNames: new(false),
				Tools: &config.RouteTools{Mode: config.ToolsAuto, Threshold: 40, Always: []string{"github.get_me"}}},
		},
		Auth: &config.Auth{
			OIDC: &config.OIDC{
				Issuer: "https://idp.example.com", Audience: "https://mcp.example.com/mcp",
				Algorithms: config.DefaultAlgorithms, Leeway: config.Duration(config.DefaultLeeway), GroupsClaim: "groups",
			},
			APIKeys: []config.APIKey{
				{Name: "ci", KeyFile: "/run/secrets/ci", Principal: "ci-bot", Groups: []string{"automation"}},
				{Name: "dev", Key: "devkey", Principal: "dev"},
			},
		},
		Admin: &config.Admin{Listen: "[::1]:9091", Pprof: true, MaxMetricNames: 50},
		Tracing: &config.Tracing{
			Endpoint: "http://127.0.0.1:4318", Protocol: config.TracingHTTP, SamplingRatio: new(0.25),
			Headers: map[string]string{"Authorization": "Bearer t0k3n"}, ServiceName: "mcpgw",
		},
		Sessions: &config.Sessions{
			KeyFile:     "/run/secrets/mcpgw-session-keys",
			IdleTimeout: config.Duration(30 * time.Minute),
			Redis:       &config.Redis{Addr: "127.0.0.1:6379"},
			MaxSessions: 500, MaxSessionsPerPrincipal: 50, MaxRequestsPerSession: 20, MaxReplayStreams: 4,
			SSEQueue: 100, SSEWriteTimeout: config.Duration(10 * time.Second), PrimingHold: config.Duration(20 * time.Millisecond),
			MaxParkedCalls: 40, MaxParkedCallsPerPrincipal: 4,
			QueueBytes: 1 << 20, QueueTotalBytes: 8 << 20,
			MaxSubscriptionsPerSession: 50, MaxSubscriptionsPerPrincipal: 500, MaxListenStreamsPerPrincipal: 5, MaxSubscriptionURIBytes: 2048,
		},
		Policy: &config.Policy{
			Default: "deny",
			Rules: []*config.PolicyRule{
				{
					Match: &config.PolicyMatch{Groups: []string{"eng"}, Subjects: []string{"alice"}},
					Allow: []string{"github.*", "fs.read_*"},
					Deny:  []string{"github.delete_*"},
				},
				{Allow: []string{"fs.*"}},
			},
		},
	}
	if !reflect.DeepEqual(c, want) {
		for name := range want.Upstreams {
			if !reflect.DeepEqual(c.Upstreams[name], want.Upstreams[name]) {
				t.Errorf("upstream %s:\n got %+v\nwant %+v", name, c.Upstreams[name], want.Upstreams[name])
			}
		}
		t.Errorf("config:\n got %+v\nwant %+v", c, want)
	}
}

func TestAnchorsAndMerge(t *testing.T) {
	c, err := loadAll("testdata/anchors.good.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b, cc := c.Upstreams["a"], c.Upstreams["b"], c.Upstreams["c"]
	if got := b.Command; !reflect.DeepEqual(got, []string{"node", "b.js"}) {
		t.Errorf("b.command = %v: an explicit key must win over a merged one", got)
	}
	if b.Timeout.D() != 5*time.Second || cc.Timeout.D() != 5*time.Second || b.Env["LEVEL"] != "debug" {
		t.Errorf("merged values missing: b %+v c %+v", b, cc)
	}
	if !cc.ForwardRoots || a.ForwardRoots || !reflect.DeepEqual(cc.Command, a.Command) {
		t.Errorf("c = %+v", cc)
	}
}

func TestEnvExpansion(t *testing.T) {
	env := envOf(map[string]string{
		"BIN":    "/usr/bin/node",
		"EMPTY":  "",
		"TOKEN":  "s3cret",
		"YAML":   "[a, b]\nkey: value",
		"NESTED": "${TOKEN}",
		"SECS":   "45s",
		"BOOL":   "true",
		"LINE":   "4096",
	})
	c := mustParse(t, `
upstreams:
  fs:
    command: ["${BIN}", "${UNSET:-default.js}", "${EMPTY:-empty-means-default}", "x${EMPTY}y", "$$HOME", "$${BIN}", "${YAML}", "${NESTED}"]
    env: {"${BIN}": "${TOKEN}", PRICE: "$$5 or $$$$"}
    timeout: ${SECS}
    startup_timeout: ${UNSET:-2s}
    forward_roots: ${BOOL}
    max_line_bytes: ${LINE}
`, env)
	fs := c.Upstreams["fs"]
	wantCmd := []string{"/usr/bin/node", "default.js", "empty-means-default", "xy", "$HOME", "${BIN}", "[a, b]\nkey: value", "${TOKEN}"}
	if !reflect.DeepEqual(fs.Command, wantCmd) {
		t.Errorf("command:\n got %q\nwant %q", fs.Command, wantCmd)
	}
	// Keys are never expanded; values are.
	wantEnv := map[string]string{"${BIN}": "s3cret", "PRICE": "$5 or $$"}
	if !reflect.DeepEqual(fs.Env, wantEnv) {
		t.Errorf("env = %q, want %q", fs.Env, wantEnv)
	}
	if fs.Timeout.D() != 45*time.Second || fs.StartupTimeout.D() != 2*time.Second || !fs.ForwardRoots || fs.MaxLineBytes != 4096 {
		t.Errorf("typed values from env: %+v", fs)
	}
}

func TestEnvUnsetNamesVariableAndKey(t *testing.T) {
	ps := parseProblems(t, "upstreams:\n  gh:\n    url: ${GH_URL}\n", nil)
	if len(ps) != 1 {
		t.Fatalf("got %d problems, want 1 (no follow-on about the empty url):\n%v", len(ps), ps)
	}
	want := "test.yaml:3: upstreams.gh.url: environment variable GH_URL is not set; export it, or give a default with ${GH_URL:-default}"
	if got := ps.Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestLoneDollarDoesNotEchoValue(t *testing.T) {
	ps := parseProblems(t, "upstreams:\n  gh:\n    url: https://x\n    headers: {Authorization: \"Bearer p4$$w0rd$XYZ\"}\n", nil)
	if len(ps) != 1 || strings.Contains(ps.Error(), "XYZ") || strings.Contains(ps.Error(), "w0rd") {
		t.Errorf("want one problem that does not quote the secret, got:\n%v", ps)
	}
}

func TestProblemFormat(t *testing.T) {
	for _, tc := range []struct {
		p    config.Problem
		want string
	}{
		{config.Problem{File: "a.yaml", Line: 3, Path: "listen", Msg: "bad; fix"}, "a.yaml:3: listen: bad; fix"},
		{config.Problem{File: "a.yaml", Path: "upstreams", Msg: "none; add"}, "a.yaml: upstreams: none; add"},
		{config.Problem{File: "a.yaml", Line: 2, Msg: "syntax; fix"}, "a.yaml:2: syntax; fix"},
		{config.Problem{Line: 2, Path: "x", Msg: "m"}, "line 2: x: m"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
	ps := config.Problems{{File: "f", Line: 1, Msg: "a"}, {File: "f", Line: 2, Msg: "b"}}
	if got := ps.Error(); got != "f:1: a\nf:2: b" {
		t.Errorf("Problems.Error() = %q", got)
	}
}

func TestProblemsSortedByLine(t *testing.T) {
	ps := parseProblems(t, `
policy: {default: maybe}
upstreams:
  fs: {url: "ftp://x"}
listen: nope
`, nil)
	for i := 1; i < len(ps); i++ {
		if ps[i-1].Line > ps[i].Line {
			t.Fatalf("problems out of line order:\n%v", ps)
		}
	}
	if len(ps) != 3 {
		t.Errorf("got %d problems, want 3:\n%v", len(ps), ps)
	}
}

func TestSummary(t *testing.T) {
	c, err := parseAll("example.yaml", configs.Example, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "config ok: 2 upstreams (fs: stdio, github: streamable), 2 routes (/mcp, /mcp/fs), listen 127.0.0.1:8080"
	if got := c.Summary(); got != want {
		t.Errorf("Summary() =\n %s\nwant\n %s", got, want)
	}
	c = mustParse(t, "listen: :9000\nauth: {insecure_no_auth: true}\nupstreams: {only: {url: 'https://x.example.com', transport: sse}}", nil)
	want = "config ok: 1 upstream (only: sse), 1 route (/mcp), listen :9000"
	if got := c.Summary(); got != want {
		t.Errorf("Summary() =\n %s\nwant\n %s", got, want)
	}
}

func TestRouteUpstreams(t *testing.T) {
	c := mustParse(t, `
upstreams:
  zeta: {command: [z]}
  alpha: {command: [a]}
  mid: {command: [m]}
routes:
  - path: /all
  - path: /two
    upstreams: [zeta, alpha]
  - path: /one
    upstreams: [mid]
    prefix: false
`, nil)
	for i, want := range [][]string{{"alpha", "mid", "zeta"}, {"alpha", "zeta"}, {"mid"}} {
		if got := c.RouteUpstreams(c.Routes[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("RouteUpstreams(%s) = %v, want %v", c.Routes[i].Path, got, want)
		}
	}
	// The result is a copy: sorting must not reorder the route's own list.
	if got := c.Routes[1].Upstreams; !reflect.DeepEqual(got, []string{"zeta", "alpha"}) {
		t.Errorf("route upstreams modified: %v", got)
	}
}

func TestPrefixFalseWithSoleUpstream(t *testing.T) {
	// A route listing no upstreams resolves to all of them; with only one,
	// prefix: false is fine.
	mustParse(t, "upstreams: {fs: {command: [x]}}\nroutes: [{path: /mcp, prefix: false}]", nil)
}

func TestShippedDefault(t *testing.T) {
	env := envOf(map[string]string{"MCPGW_EXECUTABLE": "/opt/mcpgw/bin/mcpgw"})
	c, err := parseAll("default.yaml", configs.Default, env)
	if err != nil {
		t.Fatal(err)
	}
	demo := c.Upstreams["demo"]
	if demo == nil || !reflect.DeepEqual(demo.Command, []string{"/opt/mcpgw/bin/mcpgw", "demo-server"}) || demo.Transport != "stdio" {
		t.Errorf("demo upstream = %+v", demo)
	}
	if c.Listen != "127.0.0.1:8080" || len(c.Routes) != 1 || c.Routes[0].Path != "/mcp" || len(c.Upstreams) != 1 {
		t.Errorf("default config: %s", c.Summary())
	}
	// Without the variable the failure names it, so a CLI bug is obvious.
	_, err = parseAll("default.yaml", configs.Default, nil)
	if err == nil || !strings.Contains(err.Error(), "MCPGW_EXECUTABLE is not set") {
		t.Errorf("without MCPGW_EXECUTABLE: %v", err)
	}
}

func TestShippedExample(t *testing.T) {
	// Loaded from disk too, to prove the embedded copy is the file.
	c, err := loadAll("../../configs/example.yaml", envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Upstreams["github"].Headers["Authorization"]; got != "Bearer " {
		t.Errorf("Authorization with GITHUB_TOKEN unset = %q", got)
	}
	if r := c.Routes[1]; r.Path != "/mcp/fs" || r.Prefixed() || !reflect.DeepEqual(c.RouteUpstreams(r), []string{"fs"}) {
		t.Errorf("route /mcp/fs = %+v", r)
	}
	if len(c.AllowedOrigins) == 0 {
		t.Error("example has no allowed_origins")
	}
	c, err = parseAll("example.yaml", configs.Example, envOf(map[string]string{"GITHUB_TOKEN": "ghp_x"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Upstreams["github"].Headers["Authorization"]; got != "Bearer ghp_x" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := loadAll("testdata/does-not-exist.yaml", nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestMergeBomb(t *testing.T) {
	// Each env merges the previous one twice: walked in full, u30 alone would
	// take 2^30 steps. The decoder must give up quickly with a problem.
	var b strings.Builder
	b.WriteString("upstreams:\n  u0: {command: [x], env: &e0 {A: x}}\n")
	for i := 1; i <= 30; i++ {
		prev := "*e" + strconv.Itoa(i-1)
		fmt.Fprintf(&b, "  u%d: {command: [x], env: &e%d {<<: [%s, %s]}}\n", i, i, prev, prev)
	}
	start := time.Now()
	ps := parseProblems(t, b.String(), nil)
	if len(ps) != 1 || !strings.Contains(ps.Error(), "expands to more than") {
		t.Errorf("want one expansion-limit problem, got:\n%.2000s", ps.Error())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestMergeCycle(t *testing.T) {
	ps := parseProblems(t, "upstreams:\n  fs: &fs {command: [x], <<: *fs}\n", nil)
	if !strings.Contains(ps.Error(), "<< merges a mapping into itself") {
		t.Errorf("got:\n%v", ps)
	}
}

func TestOriginsLowercased(t *testing.T) {
	c := mustParse(t, "allowed_origins: [HTTPS://App.Example.COM:8443]\nupstreams: {fs: {command: [x]}}", nil)
	if got := c.AllowedOrigins[0]; got != "https://app.example.com:8443" {
		t.Errorf("origin = %q", got)
	}
}

func TestDurationYAML(t *testing.T) {
	var d config.Duration
	c := mustParse(t, "upstreams: {fs: {command: [x], timeout: 1m30s}}", nil)
	d = c.Upstreams["fs"].Timeout
	if d.D() != 90*time.Second || d.String() != "1m30s" {
		t.Errorf("duration = %v", d)
	}
	if v, err := d.MarshalYAML(); err != nil || v != "1m30s" {
		t.Errorf("MarshalYAML = %v, %v", v, err)
	}
}

func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range seeds {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(configs.Default)
	f.Add(configs.Example)
	env := envOf(map[string]string{"SET_VAR": "v", "MCPGW_EXECUTABLE": "/bin/mcpgw", "EMPTY": ""})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseAll("fuzz.yaml", data, env)
		if err != nil {
			var ps config.Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("error %T %v, want non-empty Problems", err, err)
			}
			for _, p := range ps {
				if p.Msg == "" {
					t.Fatalf("empty problem message: %+v", p)
				}
			}
			return
		}
		if c == nil || len(c.Upstreams) == 0 || len(c.Routes) == 0 || c.Policy == nil {
			t.Fatalf("valid config missing essentials: %+v", c)
		}
		_ = c.Summary()
		for _, r := range c.Routes {
			_ = c.RouteUpstreams(r)
		}
	})
}

func TestAuthIssuers(t *testing.T) {
	c := mustParse(t, `
listen: 0.0.0.0:8080
public_url: https://mcp.example.com
upstreams: {fs: {command: [x]}}
routes: [{path: /mcp, scopes: [mcp:tools]}]
auth:
  oidc: {issuer: https://a.example.com}
  issuers:
    - {issuer: https://b.example.com, audience: mcpgw, algorithms: [ES256], leeway: 0s, groups_claim: realm_access.roles, jwks_url: https://b.example.com/keys}
    - {issuer: "http://127.0.0.1:9000"}
  required_scopes: [mcp:read]
`, nil)
	all := c.Auth.AllIssuers()
	if len(all) != 3 || all[0].Issuer != "https://a.example.com" || all[1].Issuer != "https://b.example.com" || !c.Auth.Enabled() {
		t.Fatalf("issuers = %+v", all)
	}
	if a := all[0]; a.Leeway.D() != config.DefaultLeeway || a.GroupsClaim != "groups" || !reflect.DeepEqual(a.Algorithms, config.DefaultAlgorithms) {
		t.Errorf("defaults: %+v", a)
	}
	if b := all[1]; b.Leeway != 0 || b.GroupsClaim != "realm_access.roles" || !reflect.DeepEqual(b.Algorithms, []string{"ES256"}) || b.JWKSURL != "https://b.example.com/keys" || b.Audience != "mcpgw" {
		t.Errorf("explicit values: %+v", b)
	}
	if !reflect.DeepEqual(c.Routes[0].Scopes, []string{"mcp:tools"}) || !reflect.DeepEqual(c.Auth.RequiredScopes, []string{"mcp:read"}) {
		t.Errorf("scopes: %v %v", c.Routes[0].Scopes, c.Auth.RequiredScopes)
	}
	var none *config.Auth
	if none.Enabled() || none.AllIssuers() != nil || (&config.Auth{InsecureNoAuth: true}).Enabled() {
		t.Error("Enabled without credentials")
	}
	// An API key alone is enough for a public listener.
	mustParse(t, "listen: :8080\nupstreams: {fs: {command: [x]}}\nauth: {api_keys: [{name: ci, key: k}]}\n", nil)
	for host, want := range map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true, "[::1]": true, "127.8.9.1": true, "": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "example.com": false} {
		if got := config.IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v", host, got)
		}
	}
}

func TestAdminAndRequired(t *testing.T) {
	c, err := loadAll("testdata/admin-required.good.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin == nil || c.Admin.Listen != "127.0.0.1:9091" {
		t.Errorf("admin = %+v, want listen 127.0.0.1:9091", c.Admin)
	}
	if !c.Upstreams["gh"].Required || c.Upstreams["fs"].Required {
		t.Errorf("required: gh %v fs %v, want true and false (the default)", c.Upstreams["gh"].Required, c.Upstreams["fs"].Required)
	}
	// Without admin: the admin listener stays off (no default address), so
	// a busy port can never stop the default config from starting.
	c = mustParse(t, "upstreams: {fs: {command: [node]}}", nil)
	if c.Admin != nil {
		t.Errorf("admin = %+v without an admin section, want nil (off)", c.Admin)
	}
}

// sessions.replay: absent or partial, the defaults fill it in.
func TestReplayLimits(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       config.Replay
	}{
		{"absent", "", config.Replay{SessionEvents: 512, SessionBytes: 4 << 20, TotalBytes: 256 << 20}},
		{"partial", "sessions:\n  replay: {total_bytes: 8388608}\n", config.Replay{SessionEvents: 512, SessionBytes: 4 << 20, TotalBytes: 8 << 20}},
		{"full", "sessions:\n  replay: {session_events: 8, session_bytes: 100, total_bytes: 1000}\n", config.Replay{SessionEvents: 8, SessionBytes: 100, TotalBytes: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseAll("test.yaml", []byte("upstreams: {a: {url: https://a.example.com/mcp}}\n"+tc.yaml), goodEnv)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ReplayLimits(); got != tc.want {
				t.Errorf("ReplayLimits = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// inherit_env takes variable names and prefixes ending in *, on command
// upstreams only.
func TestInheritEnv(t *testing.T) {
	c := mustParse(t, "upstreams: {fs: {command: [x], inherit_env: [NODE_EXTRA_CA_CERTS, NPM_CONFIG_*, '*', _X1]}}", nil)
	if got := c.Upstreams["fs"].InheritEnv; !slices.Equal(got, []string{"NODE_EXTRA_CA_CERTS", "NPM_CONFIG_*", "*", "_X1"}) {
		t.Errorf("inherit_env = %q", got)
	}
	ps := parseProblems(t, "upstreams:\n  fs: {command: [x], inherit_env: [A-B, 'NPM_*_X', '', 1X, '**']}\n  web: {url: 'https://api.example.com/mcp', inherit_env: [HOME]}\n", nil)
	text := ps.Error()
	for _, want := range []string{
		`upstreams.fs.inherit_env[0]: "A-B" is not a variable name`,
		`upstreams.fs.inherit_env[1]: "NPM_*_X" is not a variable name`,
		`upstreams.fs.inherit_env[2]: "" is not a variable name`,
		`upstreams.fs.inherit_env[3]: "1X" is not a variable name`,
		`upstreams.fs.inherit_env[4]: "**" is not a variable name`,
		"upstreams.web.inherit_env: inherit_env applies only to command upstreams",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("problems lack %q:\n%s", want, text)
		}
	}
}

// auth.introspection.cache_ttl is the revocation delay: a minute unless
// set, and an explicit 0 (ask every time) is kept.
func TestIntrospectionCacheTTL(t *testing.T) {
	base := "public_url: https://mcp.example.com\nupstreams: {fs: {command: [node]}}\nauth:\n  introspection: {url: https://idp.example.com/i, client_id: mcpgw, client_secret: s3cret%s}\n"
	for extra, want := range map[string]time.Duration{"": config.DefaultIntrospectionCacheTTL, ", cache_ttl: 0s": 0, ", cache_ttl: 20s": 20 * time.Second} {
		c := mustParse(t, fmt.Sprintf(base, extra), nil)
		if got := c.Auth.Introspection.CacheTTL.D(); got != want {
			t.Errorf("%q: cache_ttl %s, want %s", extra, got, want)
		}
	}
}
