package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// This file holds the policy: section (types, defaults and validation);
// internal/policy compiles it, and checks what only compiling can tell —
// the globs and the CEL conditions — with policy.CheckConfig, a Check the
// loaders pass to Parse and Load. docs: internal/policy's package comment.

// Defaults of the policy section.
const (
	DefaultRateLimitIdle = 10 * time.Minute
	DefaultMaxBuckets    = 100_000
)

// Pinning modes for Pinning.Mode.
const (
	PinOff     = "off"
	PinWarn    = "warn"
	PinEnforce = "enforce"
)

// Policy is the access policy.
type Policy struct {
	// Default decides names no rule allows or denies: allow or deny. It
	// defaults to deny when auth is configured and to allow without auth
	// and without a policy: section; a policy: section without auth must
	// say which.
	Default string        `yaml:"default"`
	Rules   []*PolicyRule `yaml:"rules"`
	// ToolScopes maps tool-name globs to the OAuth scopes a caller needs to
	// call the tools; every matching entry applies.
	ToolScopes map[string][]string `yaml:"tool_scopes"`
	// RateLimits are token buckets and concurrency caps.
	RateLimits *RateLimits `yaml:"rate_limits"`
	// Pinning checks tool definitions against a lock file.
	Pinning *Pinning `yaml:"pinning"`
}

// PolicyRule allows and denies names for matching principals. Patterns are
// globs with an optional kind prefix (see internal/policy/pattern).
type PolicyRule struct {
	Match *PolicyMatch `yaml:"match"`
	// When is an optional CEL condition (see internal/policy/cond): the
	// rule applies only when its match and its condition hold.
	When  string   `yaml:"when"`
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// PolicyMatch selects principals. Within a key any listed value matches;
// every key given must match. No match (or an empty one) matches everyone.
type PolicyMatch struct {
	Subjects  []string `yaml:"subjects"`
	Groups    []string `yaml:"groups"`
	Scopes    []string `yaml:"scopes"`
	ClientIDs []string `yaml:"client_ids"`
	// APIKeys are names of auth.api_keys entries.
	APIKeys []string `yaml:"api_keys"`
	// Routes are route paths.
	Routes []string `yaml:"routes"`
}

// RateLimits configures token buckets and concurrency caps. A call takes a
// token from every bucket that applies, or from none.
type RateLimits struct {
	// Principal is one bucket per principal, over all its calls.
	Principal *RateLimit `yaml:"principal"`
	// Tools are buckets for tools; the first entry whose glob matches the
	// tool name applies.
	Tools []*ToolRateLimit `yaml:"tools"`
	// Upstreams are per-upstream buckets and concurrency caps, by upstream name.
	Upstreams map[string]*UpstreamLimit `yaml:"upstreams"`
	// IdleTimeout forgets a principal's bucket after this long unused (never
	// before it has refilled, so forgetting never grants extra calls).
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxBuckets caps the per-principal and per-tool buckets kept; the least
	// recently used go first.
	MaxBuckets int `yaml:"max_buckets"`
}

// RateLimit is one token bucket.
type RateLimit struct {
	// Rate is the refill rate, e.g. 10/s or 600/m.
	Rate Rate `yaml:"rate"`
	// Burst is the bucket size; default the rate's count (at least 1).
	Burst int `yaml:"burst"`
}

// ToolRateLimit is a bucket for the tools matching a glob.
type ToolRateLimit struct {
	// Tool is a glob over namespaced tool names.
	Tool string `yaml:"tool"`
	// Rate and Burst as in RateLimit.
	Rate  Rate `yaml:"rate"`
	Burst int  `yaml:"burst"`
	// PerPrincipal gives each principal its own bucket per tool; otherwise
	// one bucket per tool is shared by every caller.
	PerPrincipal bool `yaml:"per_principal"`
}

// UpstreamLimit limits the calls sent to one upstream.
type UpstreamLimit struct {
	// Rate and Burst as in RateLimit; no rate means no bucket.
	Rate  Rate `yaml:"rate"`
	Burst int  `yaml:"burst"`
	// MaxConcurrent caps the calls in flight; 0 means no cap.
	MaxConcurrent int `yaml:"max_concurrent"`
}

// Pinning checks tool definitions against a lock file of approved ones.
type Pinning struct {
	// Mode is off, warn (log and count changed tools) or enforce (hide
	// and deny new or changed tools until approved).
	Mode string `yaml:"mode"`
	// LockFile is the JSON lock file written by mcpgw pin.
	LockFile string `yaml:"lock_file"`
}

// Rate is an event rate, written "N/unit" (10/s, 600/m, 1000/h) or
// "N/duration" (5/10s). The zero Rate means not set.
type Rate struct {
	N   float64
	Per time.Duration
}

// IsZero reports whether the rate is unset.
func (r Rate) IsZero() bool { return r.N == 0 || r.Per == 0 }

// PerSecond returns the rate in events per second.
func (r Rate) PerSecond() float64 {
	if r.IsZero() {
		return 0
	}
	return r.N / r.Per.Seconds()
}

// String formats the rate as UnmarshalYAML reads it.
func (r Rate) String() string {
	n := strconv.FormatFloat(r.N, 'f', -1, 64)
	switch r.Per {
	case time.Second:
		return n + "/s"
	case time.Minute:
		return n + "/m"
	case time.Hour:
		return n + "/h"
	}
	return n + "/" + r.Per.String()
}

// MarshalYAML writes the rate back in the form UnmarshalYAML reads; the
// zero Rate as null (unset), since "0/0s" is refused.
func (r Rate) MarshalYAML() (any, error) {
	if r.IsZero() {
		return nil, nil
	}
	return r.String(), nil
}

// UnmarshalYAML reads "N/unit" or "N/duration".
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	const fix = "write a count per unit, e.g. 10/s, 600/m, 1000/h or 5/10s"
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a rate, got %s; %s", strictyaml.Describe(n), fix)
	}
	num, unit, ok := strings.Cut(strings.TrimSpace(n.Value), "/")
	if !ok {
		return fmt.Errorf("%q is not a rate; %s", n.Value, fix)
	}
	count, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(count) || math.IsInf(count, 0) || count <= 0 {
		return fmt.Errorf("%q is not a rate: the count must be a number above 0; %s", n.Value, fix)
	}
	var per time.Duration
	switch unit = strings.TrimSpace(unit); unit {
	case "s", "sec", "second":
		per = time.Second
	case "m", "min", "minute":
		per = time.Minute
	case "h", "hour":
		per = time.Hour
	default:
		per, err = time.ParseDuration(unit)
		if err != nil || per <= 0 {
			return fmt.Errorf("%q is not a rate: %q is not a unit (s, m, h) or a duration above 0; %s", n.Value, unit, fix)
		}
	}
	*r = Rate{N: count, Per: per}
	return nil
}

// DefaultBurst is the bucket size for a rate when burst is not set: the
// rate's count, at least 1.
func DefaultBurst(r Rate) int {
	return max(1, int(math.Ceil(min(r.N, math.MaxInt32))))
}

// policyDefaults fills in the policy section: the default decision (deny
// when auth is configured) and rate-limit sizes.
func policyDefaults(c *Config, d *strictyaml.Decoder) {
	if c.Policy == nil {
		c.Policy = &Policy{Default: DefaultPolicy}
	}
	if !d.Set("policy.default") && c.Auth.Enabled() {
		c.Policy.Default = PolicyDeny
	}
	rl := c.Policy.RateLimits
	if rl == nil {
		return
	}
	if !d.Set("policy.rate_limits.idle_timeout") {
		rl.IdleTimeout = Duration(DefaultRateLimitIdle)
	}
	if !d.Set("policy.rate_limits.max_buckets") {
		rl.MaxBuckets = DefaultMaxBuckets
	}
	if b := rl.Principal; b != nil && !d.Set("policy.rate_limits.principal.burst") {
		b.Burst = DefaultBurst(b.Rate)
	}
	for i, t := range rl.Tools {
		if t != nil && !d.Set(fmt.Sprintf("policy.rate_limits.tools[%d].burst", i)) {
			t.Burst = DefaultBurst(t.Rate)
		}
	}
	for name, u := range rl.Upstreams {
		if u != nil && !u.Rate.IsZero() && !d.Set(strictyaml.JoinPath(strictyaml.JoinPath("policy.rate_limits.upstreams", name), "burst")) {
			u.Burst = DefaultBurst(u.Rate)
		}
	}
}

func (v *validator) policy() {
	pol := v.cfg.Policy
	switch pol.Default {
	case PolicyAllow, PolicyDeny:
	case "":
		v.add("policy.default", "is not set; set allow or deny (the decision for names no rule matches)")
	default:
		msg := fmt.Sprintf("%q is not a policy mode; use allow or deny", pol.Default)
		if s := strictyaml.Closest(pol.Default, []string{PolicyAllow, PolicyDeny}); s != "" {
			msg = fmt.Sprintf("%q is not a policy mode; did you mean %q? (allow or deny)", pol.Default, s)
		}
		v.add("policy.default", msg)
	}
	for i, r := range pol.Rules {
		p := fmt.Sprintf("policy.rules[%d]", i)
		if r == nil {
			v.add(p, "the rule is empty; give it allow: or deny: patterns, or remove it")
			continue
		}
		if len(r.Allow) == 0 && len(r.Deny) == 0 {
			v.add(p, "the rule has no allow: or deny: patterns, so it decides nothing; add them, or remove the rule")
		}
		v.policyMatch(p+".match", r.Match)
		if r.When == "" && v.dec.Set(p+".when") {
			v.add(p+".when", EmptyWhen) // a written condition is policy.CheckConfig's
		}
	}
	for _, g := range slices.Sorted(maps.Keys(pol.ToolScopes)) {
		p := strictyaml.JoinPath("policy.tool_scopes", g)
		scopes := pol.ToolScopes[g]
		if len(scopes) == 0 {
			v.add(p, "lists no scopes; list the scopes the tools need, e.g. [repo:write], or remove the entry")
		}
		for j, s := range scopes {
			if s == "" || strings.ContainsFunc(s, isSpace) {
				v.add(fmt.Sprintf("%s[%d]", p, j), fmt.Sprintf("%q is not a scope (empty, or with spaces); write one scope per item, e.g. repo:write", s))
			}
		}
	}
	v.rateLimits(pol.RateLimits)
	v.pinning(pol.Pinning)
}

// EmptyWhen is the problem with a rule's when: that is written but empty
// (policy.CheckConfig says the same of one that is only blanks).
const EmptyWhen = "is empty; write a CEL condition such as \"admin\" in principal.groups, or remove when:"

func (v *validator) policyMatch(p string, m *PolicyMatch) {
	if m == nil {
		return
	}
	lists := []struct {
		key  string
		vals []string
	}{
		{"subjects", m.Subjects}, {"groups", m.Groups}, {"scopes", m.Scopes},
		{"client_ids", m.ClientIDs}, {"api_keys", m.APIKeys}, {"routes", m.Routes},
	}
	for _, l := range lists {
		for j, s := range l.vals {
			if s == "" {
				v.add(fmt.Sprintf("%s.%s[%d]", p, l.key, j), "is empty, which no caller has; remove it or write a value")
			}
		}
		// Without auth every caller is anonymous, so a match on identity
		// never holds; that is not an error (the shipped example does it
		// with auth commented out), and explain shows it.
	}
	v.policySubjects(p, m.Subjects)
	var keys []string
	if v.cfg.Auth != nil {
		for _, k := range v.cfg.Auth.APIKeys {
			keys = append(keys, k.Name)
		}
	}
	for j, name := range m.APIKeys {
		if name != "" && !slices.Contains(keys, name) && v.cfg.Auth.Enabled() {
			v.add(fmt.Sprintf("%s.api_keys[%d]", p, j), v.noSuch("API key", name, keys, "define it under auth.api_keys"))
		}
	}
	var routes []string
	for _, r := range v.cfg.Routes {
		if r != nil {
			routes = append(routes, r.Path)
		}
	}
	for j, rp := range m.Routes {
		if rp != "" && !slices.Contains(routes, rp) {
			v.add(fmt.Sprintf("%s.routes[%d]", p, j), v.noSuch("route", rp, routes, "define it under routes:"))
		}
	}
}

// noSuch explains a reference to a name that is not defined.
func (v *validator) noSuch(what, name string, known []string, define string) string {
	msg := fmt.Sprintf("there is no %s %q", what, name)
	switch s := strictyaml.Closest(name, known); {
	case s != "":
		return msg + fmt.Sprintf("; did you mean %q?", s)
	case len(known) > 0:
		return msg + "; use one of: " + strings.Join(known, ", ")
	}
	return msg + "; " + define
}

func (v *validator) rateLimits(rl *RateLimits) {
	if rl == nil {
		return
	}
	const p = "policy.rate_limits"
	if rl.Principal != nil {
		v.bucket(p+".principal", rl.Principal.Rate, rl.Principal.Burst, true)
	}
	for i, t := range rl.Tools {
		tp := fmt.Sprintf("%s.tools[%d]", p, i)
		if t == nil {
			v.add(tp, "is empty; give it tool: (a glob) and rate:, or remove it")
			continue
		}
		if t.Tool == "" { // a glob written is policy.CheckConfig's
			v.add(tp+".tool", "is not set; give a glob over tool names, e.g. github__create_*")
		}
		v.bucket(tp, t.Rate, t.Burst, true)
	}
	known := slices.Sorted(maps.Keys(v.cfg.Upstreams))
	for _, name := range slices.Sorted(maps.Keys(rl.Upstreams)) {
		up := strictyaml.JoinPath(p+".upstreams", name)
		if !slices.Contains(known, name) {
			v.add(up, v.noSuch("upstream", name, known, "define it under upstreams:"))
		}
		u := rl.Upstreams[name]
		if u == nil || (u.Rate.IsZero() && u.MaxConcurrent == 0 && u.Burst == 0) {
			v.add(up, "limits nothing; set rate: (e.g. 50/s) and/or max_concurrent: (e.g. 8), or remove it")
			continue
		}
		if u.MaxConcurrent < 0 {
			v.add(up+".max_concurrent", fmt.Sprintf("%d is negative; set the most calls in flight at once, e.g. 8, or remove it for no cap", u.MaxConcurrent))
		}
		v.bucket(up, u.Rate, u.Burst, false)
	}
	if rl.IdleTimeout <= 0 {
		v.add(p+".idle_timeout", fmt.Sprintf("must be more than 0; remove it for the default (%s) or set e.g. 10m", DefaultRateLimitIdle))
	}
	if rl.MaxBuckets < 1 {
		v.add(p+".max_buckets", fmt.Sprintf("must be at least 1; remove it for the default (%d) or set e.g. 10000", DefaultMaxBuckets))
	}
}

// bucket checks a rate and burst at path p.
func (v *validator) bucket(p string, r Rate, burst int, needRate bool) {
	if r.IsZero() {
		if needRate {
			v.add(p+".rate", "is not set; give a rate such as 10/s or 600/m")
		} else if burst != 0 {
			v.add(p+".burst", "applies to a rate, which is not set; add rate: (e.g. 50/s) or remove burst")
		}
		return
	}
	if burst < 1 {
		v.add(p+".burst", fmt.Sprintf("%d is less than 1, which would refuse every call; remove it for the default (the rate's count) or set e.g. 10", burst))
	}
}

func (v *validator) pinning(pn *Pinning) {
	if pn == nil {
		return
	}
	const p = "policy.pinning"
	switch pn.Mode {
	case PinOff, PinWarn, PinEnforce:
	case "":
		v.add(p+".mode", "is not set; set off, warn (log changed tools) or enforce (hide and deny them until approved)")
	default:
		msg := fmt.Sprintf("%q is not a pinning mode; use off, warn or enforce", pn.Mode)
		if s := strictyaml.Closest(pn.Mode, []string{PinOff, PinWarn, PinEnforce}); s != "" {
			msg = fmt.Sprintf("%q is not a pinning mode; did you mean %q? (off, warn or enforce)", pn.Mode, s)
		}
		v.add(p+".mode", msg)
	}
	if (pn.Mode == PinWarn || pn.Mode == PinEnforce) && pn.LockFile == "" {
		v.add(p+".lock_file", fmt.Sprintf("is not set, and mode %s needs the approved definitions; set lock_file: /etc/mcpgw/tools.lock.json (write it with mcpgw pin)", pn.Mode))
	}
}

// Where a policy subject comes from (match.subjects): a bare subject is
// any identity source's; "apikey:<principal>" only an API key's (its
// principal:); "<issuer>#<sub>" only a token's from that issuer (an issuer
// URL has no fragment, so the first # ends it).
type SubjectSource int

// The subject sources.
const (
	SubjectAny SubjectSource = iota
	SubjectAPIKey
	SubjectIssuer
)

// SubjectAPIKeyPrefix marks a subject that only an API key's principal has.
const SubjectAPIKeyPrefix = "apikey:"

// ParseSubject reads one match.subjects entry.
func ParseSubject(s string) (source SubjectSource, issuer, sub string) {
	if rest, ok := strings.CutPrefix(s, SubjectAPIKeyPrefix); ok {
		return SubjectAPIKey, "", rest
	}
	if iss, rest, ok := strings.Cut(s, "#"); ok && (strings.HasPrefix(iss, "https://") || strings.HasPrefix(iss, "http://")) {
		return SubjectIssuer, iss, rest
	}
	return SubjectAny, "", s
}

// policySubjects checks match.subjects at p: a qualified subject names a
// source that is configured, and a bare one is refused when several
// sources could issue it (an OIDC user whose sub is ci-bot is not the API
// key whose principal is ci-bot).
func (v *validator) policySubjects(p string, subjects []string) {
	a := v.cfg.Auth
	if a == nil {
		return
	}
	var issuers, principals []string
	for _, o := range a.AllIssuers() {
		issuers = append(issuers, o.Issuer)
	}
	for _, k := range a.APIKeys {
		pr := k.Principal
		if pr == "" {
			pr = k.Name
		}
		principals = append(principals, pr)
	}
	// The sources that may issue sub: every token source, and the API
	// keys when one acts as sub.
	sourcesOf := func(sub string) int {
		n := len(issuers)
		if a.Introspection != nil {
			n++
		}
		if a.ClientCertificates != nil {
			n++ // any certificate the client CA signed may name it
		}
		if slices.Contains(principals, sub) {
			n++
		}
		return n
	}
	for j, s := range subjects {
		if s == "" {
			continue // reported as empty
		}
		at := fmt.Sprintf("%s.subjects[%d]", p, j)
		switch src, iss, sub := ParseSubject(s); {
		case sub == "":
			v.add(at, fmt.Sprintf("%q names no subject; write %q or %q", s, SubjectAPIKeyPrefix+"<principal>", "<issuer>#<sub>"))
		case src == SubjectAPIKey && !slices.Contains(principals, sub):
			v.add(at, fmt.Sprintf("no auth.api_keys entry acts as principal %q; define one, or fix the name", sub))
		case src == SubjectIssuer && !slices.Contains(issuers, iss) && a.Introspection == nil:
			v.add(at, fmt.Sprintf("issuer %q is not configured (auth.oidc, auth.issuers: %s); fix the issuer", iss, strings.Join(issuers, ", ")))
		case src == SubjectAny && sourcesOf(sub) > 1:
			var fix []string
			if slices.Contains(principals, sub) {
				fix = append(fix, fmt.Sprintf("%q for the API key's principal", SubjectAPIKeyPrefix+sub))
			}
			for _, i := range issuers {
				fix = append(fix, fmt.Sprintf("%q for issuer %s", i+"#"+sub, i))
			}
			v.add(at, fmt.Sprintf("%q is ambiguous: %d identity sources may issue that subject; name its source: %s", s, sourcesOf(sub), strings.Join(fix, ", ")))
		}
	}
}
