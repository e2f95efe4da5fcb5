package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
	"github.com/mcpgw/mcpgw/internal/policy/cond"
	"github.com/mcpgw/mcpgw/internal/policy/pattern"
)

// CheckConfig is the config.Check of the policy section: what only the
// package that compiles it can judge — the rules' allow/deny globs (and
// kind prefixes), their CEL conditions, the tool_scopes and rate-limit
// tool globs — reported at each value's path with the fix, beside
// config's own problems. Compile reads the same values by the same
// functions; a config that passes here compiles.
func CheckConfig(c *config.Config, add func(path, msg string)) {
	// Interceptors match tools with the policy's patterns.
	for i, ic := range c.Interceptors {
		if ic == nil || ic.Match == nil {
			continue
		}
		for j, t := range ic.Match.Tools {
			if _, err := pattern.Parse(t); err != nil {
				add(fmt.Sprintf("interceptors[%d].match.tools[%d]", i, j), fmt.Sprintf("%v; write a glob such as demo__* (* is any run of characters, ? one character, \\ escapes)", err))
			}
		}
	}
	pol := c.Policy
	if pol == nil {
		return
	}
	// Large policies repeat a few conditions over many rules, and checking
	// one costs about a millisecond: each text is checked once.
	conds := map[string]error{}
	for i, r := range pol.Rules {
		if r == nil {
			continue
		}
		p := fmt.Sprintf("policy.rules[%d]", i)
		if r.When != "" {
			checkCondition(add, conds, p+".when", r.When)
		}
		checkPatterns(add, p+".allow", r.Allow)
		checkPatterns(add, p+".deny", r.Deny)
	}
	for _, g := range slices.Sorted(maps.Keys(pol.ToolScopes)) {
		p := strictyaml.JoinPath("policy.tool_scopes", g)
		if kind, _ := pattern.SplitKind(g); kind != pattern.KindAny {
			add(p, fmt.Sprintf("%q has a kind prefix, but tool_scopes keys are globs over tool names; write %q", g, strings.TrimPrefix(g, kind+":")))
		} else if _, err := pattern.Compile(g); err != nil {
			add(p, fmt.Sprintf("%v; write a glob such as github__* (* is any run of characters, ? one character, \\ escapes)", err))
		}
	}
	if rl := pol.RateLimits; rl != nil {
		for i, t := range rl.Tools {
			if t == nil || t.Tool == "" {
				continue // config reports it
			}
			if _, err := pattern.Compile(t.Tool); err != nil {
				add(fmt.Sprintf("policy.rate_limits.tools[%d].tool", i), fmt.Sprintf("%v; write a glob such as github__* (* is any run of characters)", err))
			}
		}
	}
}

// checkCondition parses and type-checks a rule's CEL condition (Compile
// plans its evaluation).
func checkCondition(add func(path, msg string), conds map[string]error, p, src string) {
	const fix = "variables are " + cond.Variables + "; e.g. \"admin\" in principal.groups && arguments.repo.startsWith(\"acme/\")"
	err, done := conds[src]
	if !done {
		err = cond.Check(src)
		conds[src] = err
	}
	var ce *cond.CompileError
	switch {
	case err == nil:
	case errors.As(err, &ce) && len(ce.Issues) == 1 && ce.Issues[0].Msg == "the expression is empty":
		add(p, config.EmptyWhen)
	case errors.As(err, &ce) && len(ce.Issues) == 1 && strings.HasPrefix(ce.Issues[0].Msg, "the expression is of type"):
		add(p, fmt.Sprintf("%s; write a condition that is true or false, e.g. arguments.dry_run == true (compare a value rather than use it alone)", ce.Issues[0].Msg))
	default:
		add(p, fmt.Sprintf("is not a valid CEL condition: %v; %s", err, fix))
	}
}

// checkPatterns checks allow/deny patterns.
func checkPatterns(add func(path, msg string), p string, pats []string) {
	for i, s := range pats {
		ip := fmt.Sprintf("%s[%d]", p, i)
		if _, err := pattern.Parse(s); err != nil {
			add(ip, fmt.Sprintf("%v; write a glob such as github__* or tool:fs__read_* (* is any run of characters, ? one character, \\ escapes)", err))
			continue
		}
		// "tools:x" is a glob that matches only a name starting "tools:",
		// almost certainly a misspelt kind prefix.
		if kind, _ := pattern.SplitKind(s); kind == pattern.KindAny {
			if word, _, ok := strings.Cut(s, ":"); ok && word != "" && !strings.ContainsAny(word, "*?\\+_/.") {
				if k := strictyaml.Closest(word, pattern.Kinds); k != "" && k != word {
					add(ip, fmt.Sprintf("%q starts with %q, which is not a kind; did you mean %q? (kinds are tool:, prompt: and resource:; write resource:%s to match a URI with that scheme)", s, word+":", k+":", s))
				}
			}
		}
	}
}
