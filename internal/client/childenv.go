package client

import (
	"maps"
	"slices"
	"strings"
)

// A stdio child does not get the gateway's whole environment: that holds
// every upstream's credentials (the ${VAR}s of HTTP upstreams' headers, of
// other children's env), and one compromised child could print them all.
// It gets what a program needs to run (baseEnv), the variables its upstream
// names in inherit_env, and its own env: on top.

// baseEnv lists the variables every child gets from the gateway's
// environment: where programs are found (PATH), the user and home (HOME,
// USER, LOGNAME: npm's cache and config live under HOME), the locale
// (LANG, LANGUAGE and every LC_*), the time zone (TZ) and the place for
// temporary files (TMPDIR). A name ending in "*" is a prefix.
func baseEnv() []string {
	return []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR"}
}

// BaseEnv returns the names (and "LC_*") every child gets (see baseEnv).
func BaseEnv() []string { return baseEnv() }

// EnvPatternMatches reports whether the variable name matches pattern: the
// same name, or a prefix when pattern ends in "*".
func EnvPatternMatches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return name == pattern
}

// ChildEnv is a child's environment: the variables of environ (the
// gateway's, as "NAME=value") that baseEnv or inherit names, then env,
// which wins over them. The result is sorted by name and names each
// variable once, so what the child sees does not depend on map order. It
// is never nil: exec.Cmd reads a nil Env as the gateway's whole one.
func ChildEnv(environ, inherit []string, env map[string]string) []string {
	base := baseEnv()
	out := make(map[string]string, len(env)+len(base))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if slices.ContainsFunc(base, func(p string) bool { return EnvPatternMatches(p, name) }) ||
			slices.ContainsFunc(inherit, func(p string) bool { return EnvPatternMatches(p, name) }) {
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
