package client

import (
	"maps"
	"slices"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
)

// A stdio child does not get the gateway's whole environment: that holds
// every upstream's credentials (the ${VAR}s of HTTP upstreams' headers, of
// other children's env), and one compromised child could print them all.
// It gets what a program needs to run (config.ChildBaseEnv), the variables
// its upstream names in inherit_env, and its own env: on top.

// ChildEnv is a child's environment: the variables of environ (the
// gateway's, as "NAME=value") that config.ChildBaseEnv or inherit names, then env,
// which wins over them. The result is sorted by name and names each
// variable once, so what the child sees does not depend on map order. It
// is never nil: exec.Cmd reads a nil Env as the gateway's whole one.
func ChildEnv(environ, inherit []string, env map[string]string) []string {
	base := config.ChildBaseEnv()
	out := make(map[string]string, len(env)+len(base))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if slices.ContainsFunc(base, func(p string) bool { return config.EnvPatternMatches(p, name) }) ||
			slices.ContainsFunc(inherit, func(p string) bool { return config.EnvPatternMatches(p, name) }) {
			out[name] = value
		}
	}
	for k, v := range env {
		out[k] = v
	}
	list := make([]string, 0, len(out))
	for _, k := range slices.Sorted(maps.Keys(out)) {
		list = append(list, k+"="+out[k])
	}
	return list
}
