package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
)

// A stdio child gets a minimal environment (config.ChildBaseEnv and its
// inherit_env), where it used to get the gateway's whole one. validate
// warns about children that look as if they relied on the rest; what a
// program reads from its environment cannot be seen from outside, so
// this catches two telling cases only:
//
//   - the argv refers to a variable the child will expand itself: a shell's
//     $NAME or ${NAME} (written $$NAME in the config, since the gateway
//     expands ${NAME} itself when it loads the config);
//   - the gateway's environment has a variable named after the upstream
//     (GITHUB_TOKEN for an upstream "github"), the way servers name theirs.
//
// Each warning names the variable and the fix (env: or inherit_env:).

// shellVar finds $NAME and ${NAME} references in an argument.
var shellVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// envWarnings returns the warnings for cfg's stdio upstreams, given the
// gateway's environment ("NAME=value").
func envWarnings(cfg *config.Config, environ []string) []string {
	var names []string // the gateway's variables
	for _, kv := range environ {
		if n, _, ok := strings.Cut(kv, "="); ok && n != "" {
			names = append(names, n)
		}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		u := cfg.Upstreams[name]
		if u == nil || len(u.Command) == 0 {
			continue
		}
		gets := func(v string) bool {
			if _, ok := u.Env[v]; ok {
				return true
			}
			return slices.ContainsFunc(append(config.ChildBaseEnv(), u.InheritEnv...), func(p string) bool { return config.EnvPatternMatches(p, v) })
		}
		p := "upstreams." + name
		seen := map[string]bool{}
		for _, arg := range u.Command {
			for _, m := range shellVar.FindAllStringSubmatch(arg, -1) {
				if v := m[1]; !gets(v) && !seen[v] {
					seen[v] = true
					out = append(out, fmt.Sprintf("%s.command refers to $%s, which the child does not get: a stdio child gets only %s of the gateway's environment; pass it with %s.env (NAME: \"${NAME}\") or %s.inherit_env: [%s]",
						p, v, strings.Join(config.ChildBaseEnv(), ", "), p, p, v))
				}
			}
		}
		key := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
		if len(key) < 3 {
			continue // too short to tell a name from a coincidence
		}
		for _, v := range slices.Sorted(slices.Values(names)) {
			if !seen[v] && !gets(v) && strings.Contains(v, key) {
				seen[v] = true
				out = append(out, fmt.Sprintf("%s: the gateway's environment has %s, which the child no longer gets (a stdio child gets only %s of it); if the server reads it, pass it with %s.env or %s.inherit_env: [%s]",
					p, v, strings.Join(config.ChildBaseEnv(), ", "), p, p, v))
			}
		}
	}
	return out
}
