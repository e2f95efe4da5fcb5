package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/intercept"
	"github.com/mcpgw/mcpgw/internal/principal"
)

const interceptUsage = `Usage:
  mcpgw intercept test --config FILE --tool NAME (--result FILE | --arguments FILE) [--route PATH] [--upstream NAME] [--groups a,b]

A dry run of the interceptors: what each would do to a tool result
(result phase) or a call's arguments (request phase), and the member as
it would go on, on stdout. External interceptors are not called (a dry
run sends nothing anywhere). Exit status: 0 passed (perhaps changed),
3 refused, 1 config or file error, 2 usage error.
`

// cmdIntercept runs "mcpgw intercept SUBCOMMAND".
func cmdIntercept(args []string, stdout, stderr io.Writer) int {
	return subcommand("mcpgw intercept", interceptUsage, map[string]command{"test": cmdInterceptTest}, args, stdout, stderr) // policy.go
}

func cmdInterceptTest(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcpgw intercept test")
	cfgPath := fs.String("config", "", "the config `FILE`")
	fs.StringVar(cfgPath, "c", "", "the config `FILE` (short for --config)")
	tool := fs.String("tool", "", "the namespaced tool `NAME`, e.g. demo__echo")
	resultFile := fs.String("result", "", "a `FILE` holding a tools/call result object (result phase)")
	argsFile := fs.String("arguments", "", "a `FILE` holding a call's arguments object (request phase)")
	route := fs.String("route", "", "the route `PATH` (default: the first route)")
	upstream := fs.String("upstream", "", "the upstream `NAME` (default: the tool name's prefix)")
	groups := fs.String("groups", "", "the caller's comma-separated `GROUPS`")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *cfgPath == "" || *tool == "" || (*resultFile == "") == (*argsFile == "") {
		fmt.Fprint(stderr, "mcpgw intercept test: --config, --tool and one of --result or --arguments are required\n\n"+interceptUsage)
		return exitUsage
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	set, err := intercept.New(cfg.Interceptors, intercept.Options{})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	phase, file := config.PhaseResult, *resultFile
	if *argsFile != "" {
		phase, file = config.PhaseRequest, *argsFile
	}
	member, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	t := intercept.Target{Route: *route, Upstream: *upstream, Kind: "tool", Name: *tool, Method: "tools/call",
		Principal: &principal.Principal{Groups: splitList(*groups)}}
	if t.Route == "" && len(cfg.Routes) > 0 {
		t.Route = cfg.Routes[0].Path
	}
	if up, _, ok := strings.Cut(*tool, cfg.Separator); ok && t.Upstream == "" {
		t.Upstream = up
	}
	steps, o := set.Explain(context.Background(), phase, &t, member)
	if len(steps) == 0 {
		fmt.Fprintf(stderr, "no interceptor runs in the %s phase\n", phase)
	}
	for _, s := range steps {
		line := fmt.Sprintf("%s (%s, %s): %s", s.Name, s.Type, phase, s.Outcome)
		if s.Reason != "" {
			line += ": " + s.Reason
		}
		fmt.Fprintln(stderr, line)
	}
	if o.Denied {
		fmt.Fprintf(stderr, "refused by %s: %s\n", o.By, o.Reason)
		return exitDenied
	}
	_, _ = stdout.Write(o.Out)
	if len(o.Out) > 0 && o.Out[len(o.Out)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
	return 0
}
