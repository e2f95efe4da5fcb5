package config

import "strings"

// What a stdio child's environment is made of, as far as the config's
// inherit_env: speaks of it: the variables every child gets, and how an
// inherit_env pattern matches a name. internal/client builds the
// environment (ChildEnv); validate's warnings read the same facts.

// ChildBaseEnv lists the variables every child gets from the gateway's
// environment: where programs are found (PATH), the user and home (HOME,
// USER, LOGNAME: npm's cache and config live under HOME), the locale
// (LANG, LANGUAGE and every LC_*), the time zone (TZ) and the place for
// temporary files (TMPDIR). A name ending in "*" is a prefix.
func ChildBaseEnv() []string {
	return []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR"}
}

// EnvPatternMatches reports whether the variable name matches pattern (an
// entry of ChildBaseEnv or inherit_env): the same name, or a prefix when
// pattern ends in "*".
func EnvPatternMatches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return name == pattern
}
