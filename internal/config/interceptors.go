package config

import (
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// This file holds the interceptors: section (types, defaults and
// validation); internal/intercept runs them (docs/interceptors.md).

// Interceptor types.
const (
	InterceptRedact          = "redact"
	InterceptDenyMatch       = "deny_match"
	InterceptMaxSize         = "max_size"
	InterceptDescriptionScan = "description_scan"
	InterceptExternal        = "external"
)

// InterceptTypes lists the interceptor types, for messages and the schema.
var InterceptTypes = []string{InterceptRedact, InterceptDenyMatch, InterceptMaxSize, InterceptDescriptionScan, InterceptExternal}

// Interceptor phases.
const (
	PhaseRequest = "request"
	PhaseResult  = "result"
	PhaseList    = "list"
)

// InterceptPhases lists the phases.
var InterceptPhases = []string{PhaseRequest, PhaseResult, PhaseList}

// Fail modes of an external interceptor.
const (
	FailClosed = "closed"
	FailOpen   = "open"
)

// Actions of a description_scan.
const (
	ScanFlag = "flag"
	ScanHide = "hide"
)

// RedactDetectors are the named detectors of redact and deny_match
// (internal/intercept holds their expressions; a test checks both agree).
var RedactDetectors = []string{"aws_access_key", "private_key", "jwt", "github_token", "slack_token", "openai_key", "email", "phone", "credit_card"}

// Interceptor defaults and bounds.
const (
	DefaultInterceptReplacement    = "[redacted]"
	DefaultInterceptTimeout        = 5 * time.Second
	DefaultInterceptConcurrency    = 16
	DefaultInterceptBodyBytes      = 1 << 20
	DefaultInterceptDescriptionMax = 4096
	// MaxInterceptPatternBytes and MaxInterceptPatternInsts bound a
	// regular expression: RE2 never backtracks, but its state grows with
	// the program, and every result runs through it.
	MaxInterceptPatternBytes = 1024
	MaxInterceptPatternInsts = 4000
)

// Interceptor inspects, redacts, refuses or rewrites what passes one phase
// of the request path.
type Interceptor struct {
	// Name identifies the interceptor in metrics, logs and audit records.
	Name string `yaml:"name"`
	// Type is redact, deny_match, max_size, description_scan or external.
	Type string `yaml:"type"`
	// Phase is request, result or list.
	Phase string `yaml:"phase"`
	// Match limits what the interceptor sees (absent: everything).
	Match *InterceptMatch `yaml:"match"`

	// Detectors (redact, deny_match) are named patterns (RedactDetectors).
	Detectors []string `yaml:"detectors"`
	// Patterns (redact, deny_match) are RE2 regular expressions.
	Patterns []string `yaml:"patterns"`
	// Replacement (redact) replaces each match. Default "[redacted]".
	Replacement string `yaml:"replacement"`
	// CaseInsensitive (deny_match, redact) matches patterns ignoring case.
	CaseInsensitive bool `yaml:"case_insensitive"`
	// Reason (deny_match, max_size) is what the caller is told.
	Reason string `yaml:"reason"`
	// MaxBytes (max_size) bounds the judged member.
	MaxBytes int64 `yaml:"max_bytes"`
	// Action (description_scan) is flag (log and audit) or hide.
	Action string `yaml:"action"`
	// MaxDescriptionBytes (description_scan): a longer description is
	// flagged. Default 4096.
	MaxDescriptionBytes int `yaml:"max_description_bytes"`

	// URL (external) is the operator's service.
	URL string `yaml:"url"`
	// Timeout (external) bounds one call. Default 5s.
	Timeout Duration `yaml:"timeout"`
	// MaxConcurrent (external) bounds calls in flight. Default 16.
	MaxConcurrent int `yaml:"max_concurrent"`
	// MaxBodyBytes (external) bounds the request and the answer. Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Fail (external) is closed (refuse when the service fails) or open.
	Fail string `yaml:"fail"`
	// BearerTokenFile (external) holds a token sent as Authorization.
	BearerTokenFile string `yaml:"bearer_token_file"`
}

// InterceptMatch says which traffic an interceptor sees; each list that
// is set must match (an empty list matches all).
type InterceptMatch struct {
	// Routes are route paths.
	Routes []string `yaml:"routes"`
	// Upstreams are upstream names.
	Upstreams []string `yaml:"upstreams"`
	// Tools are name patterns (policy rule syntax: globs with an optional
	// tool:, prompt: or resource: prefix) over the namespaced name or URI.
	Tools []string `yaml:"tools"`
	// Groups: the caller is in one of them.
	Groups []string `yaml:"groups"`
}

func interceptorDefaults(c *Config, d *strictyaml.Decoder) {
	for i, ic := range c.Interceptors {
		if ic == nil {
			continue
		}
		p := fmt.Sprintf("interceptors[%d]", i)
		if ic.Type == InterceptRedact && !d.Set(p+".replacement") {
			ic.Replacement = DefaultInterceptReplacement
		}
		if ic.Type == InterceptDescriptionScan {
			if !d.Set(p + ".action") {
				ic.Action = ScanFlag
			}
			if !d.Set(p + ".max_description_bytes") {
				ic.MaxDescriptionBytes = DefaultInterceptDescriptionMax
			}
		}
		if ic.Type == InterceptExternal {
			if !d.Set(p + ".timeout") {
				ic.Timeout = Duration(DefaultInterceptTimeout)
			}
			if !d.Set(p + ".max_concurrent") {
				ic.MaxConcurrent = DefaultInterceptConcurrency
			}
			if !d.Set(p + ".max_body_bytes") {
				ic.MaxBodyBytes = DefaultInterceptBodyBytes
			}
			if !d.Set(p + ".fail") {
				ic.Fail = FailClosed
			}
		}
	}
}

// interceptPhases are the phases each type can run in.
var interceptPhases = map[string][]string{
	InterceptRedact:          {PhaseRequest, PhaseResult},
	InterceptDenyMatch:       {PhaseRequest, PhaseResult, PhaseList},
	InterceptMaxSize:         {PhaseRequest, PhaseResult},
	InterceptDescriptionScan: {PhaseList},
	InterceptExternal:        {PhaseRequest, PhaseResult},
}

func (v *validator) interceptors() {
	seen := map[string]int{}
	for i, ic := range v.cfg.Interceptors {
		p := fmt.Sprintf("interceptors[%d]", i)
		if ic == nil {
			v.add(p, "is empty; give name, type and phase")
			continue
		}
		switch {
		case ic.Name == "":
			v.add(p+".name", "is required; give a short name such as redact-secrets (it labels metrics and audit records)")
		case !validName(ic.Name):
			v.add(p+".name", fmt.Sprintf("%q: use letters, digits, _, . and -, starting with a letter or digit", ic.Name))
		default:
			if j, dup := seen[ic.Name]; dup {
				v.add(p+".name", fmt.Sprintf("%q repeats interceptors[%d]; names must be unique", ic.Name, j))
			}
			seen[ic.Name] = i
		}
		phases, okType := interceptPhases[ic.Type]
		if !okType {
			v.add(p+".type", fmt.Sprintf("%q is not a type; use one of %s", ic.Type, strings.Join(InterceptTypes, ", ")))
		}
		switch {
		case !slices.Contains(InterceptPhases, ic.Phase):
			v.add(p+".phase", fmt.Sprintf("%q is not a phase; use one of %s", ic.Phase, strings.Join(InterceptPhases, ", ")))
		case okType && !slices.Contains(phases, ic.Phase):
			v.add(p+".phase", fmt.Sprintf("%s cannot run in the %s phase; use %s", ic.Type, ic.Phase, strings.Join(phases, " or ")))
		}
		v.interceptMatch(p+".match", ic.Match)
		v.interceptOptions(p, ic)
	}
}

func (v *validator) interceptMatch(p string, m *InterceptMatch) {
	if m == nil {
		return
	}
	for i, r := range m.Routes {
		if !slices.ContainsFunc(v.cfg.Routes, func(rt *Route) bool { return rt != nil && rt.Path == r }) {
			v.add(fmt.Sprintf("%s.routes[%d]", p, i), fmt.Sprintf("%q is not a configured route path; name one under routes:", r))
		}
	}
	for i, u := range m.Upstreams {
		if _, ok := v.cfg.Upstreams[u]; !ok {
			v.add(fmt.Sprintf("%s.upstreams[%d]", p, i), fmt.Sprintf("%q is not a configured upstream; name one under upstreams:", u))
		}
	}
	// m.Tools are policy patterns: policy.CheckConfig judges them.
	for i, g := range m.Groups {
		if strings.TrimSpace(g) == "" {
			v.add(fmt.Sprintf("%s.groups[%d]", p, i), "is empty; give a group name or remove the entry")
		}
	}
}

// only names the options that belong to some types and not to ic's.
func (v *validator) interceptOptions(p string, ic *Interceptor) {
	t := ic.Type
	matcher := t == InterceptRedact || t == InterceptDenyMatch
	wrong := func(key string, set bool, types string) {
		if set {
			v.add(p+"."+key, fmt.Sprintf("belongs to %s, not to a %s interceptor; remove it", types, t))
		}
	}
	if _, ok := interceptPhases[t]; !ok {
		return // the type is reported; options cannot be judged
	}
	wrong("detectors", len(ic.Detectors) > 0 && !matcher, "redact and deny_match")
	wrong("patterns", len(ic.Patterns) > 0 && !matcher, "redact and deny_match")
	wrong("case_insensitive", ic.CaseInsensitive && !matcher, "redact and deny_match")
	wrong("replacement", ic.Replacement != "" && t != InterceptRedact, "redact")
	wrong("reason", ic.Reason != "" && t != InterceptDenyMatch && t != InterceptMaxSize, "deny_match and max_size")
	wrong("max_bytes", ic.MaxBytes != 0 && t != InterceptMaxSize, "max_size")
	wrong("action", ic.Action != "" && t != InterceptDescriptionScan, "description_scan")
	wrong("max_description_bytes", ic.MaxDescriptionBytes != 0 && t != InterceptDescriptionScan, "description_scan")
	ext := t == InterceptExternal
	wrong("url", ic.URL != "" && !ext, "external")
	wrong("timeout", ic.Timeout != 0 && !ext, "external")
	wrong("max_concurrent", ic.MaxConcurrent != 0 && !ext, "external")
	wrong("max_body_bytes", ic.MaxBodyBytes != 0 && !ext, "external")
	wrong("fail", ic.Fail != "" && !ext, "external")
	wrong("bearer_token_file", ic.BearerTokenFile != "" && !ext, "external")

	if matcher {
		if len(ic.Detectors) == 0 && len(ic.Patterns) == 0 {
			v.add(p, fmt.Sprintf("a %s interceptor needs detectors or patterns; e.g. detectors: [aws_access_key, email]", t))
		}
		for i, d := range ic.Detectors {
			if !slices.Contains(RedactDetectors, d) {
				v.add(fmt.Sprintf("%s.detectors[%d]", p, i), fmt.Sprintf("%q is not a detector; use one of %s", d, strings.Join(RedactDetectors, ", ")))
			}
		}
		for i, re := range ic.Patterns {
			if msg := CheckInterceptPattern(re); msg != "" {
				v.add(fmt.Sprintf("%s.patterns[%d]", p, i), msg)
			}
		}
	}
	switch t {
	case InterceptMaxSize:
		if ic.MaxBytes <= 0 {
			v.add(p+".max_bytes", "must be more than 0 bytes; e.g. 1048576")
		}
	case InterceptDescriptionScan:
		if ic.Action != ScanFlag && ic.Action != ScanHide {
			v.add(p+".action", fmt.Sprintf("%q is not an action; use flag or hide", ic.Action))
		}
		if ic.MaxDescriptionBytes <= 0 {
			v.add(p+".max_description_bytes", "must be more than 0 bytes; remove it for the default (4096)")
		}
	case InterceptExternal:
		if ic.URL == "" {
			v.add(p+".url", "is required; give the service's http(s) URL, e.g. https://guard.internal/v1/intercept")
		} else if u, err := url.Parse(ic.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(p+".url", fmt.Sprintf("%q is not an http(s) URL; e.g. https://guard.internal/v1/intercept", ic.URL))
		}
		if ic.Timeout.D() <= 0 {
			v.add(p+".timeout", "must be more than 0; e.g. 2s")
		}
		if ic.MaxConcurrent <= 0 {
			v.add(p+".max_concurrent", fmt.Sprintf("must be at least 1; remove it for the default (%d)", DefaultInterceptConcurrency))
		}
		if ic.MaxBodyBytes <= 0 {
			v.add(p+".max_body_bytes", fmt.Sprintf("must be more than 0 bytes; remove it for the default (%d)", DefaultInterceptBodyBytes))
		}
		if ic.Fail != FailClosed && ic.Fail != FailOpen {
			v.add(p+".fail", fmt.Sprintf("%q is not a fail mode; use closed (refuse when the service fails) or open", ic.Fail))
		}
	}
}

// CheckInterceptPattern reports what is wrong with an interceptor's
// regular expression ("" when nothing): it must compile (RE2) and stay
// within the size bounds, since every judged member runs through it.
func CheckInterceptPattern(re string) string {
	if re == "" {
		return "is empty; give a regular expression or remove the entry"
	}
	if len(re) > MaxInterceptPatternBytes {
		return fmt.Sprintf("is %d bytes; a pattern may have at most %d (split it into several)", len(re), MaxInterceptPatternBytes)
	}
	if _, err := regexp.Compile(re); err != nil {
		return fmt.Sprintf("is not a regular expression (RE2 syntax): %v; fix it (Go regexp syntax)", err)
	}
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return fmt.Sprintf("is not a regular expression (RE2 syntax): %v; fix it (Go regexp syntax)", err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return fmt.Sprintf("cannot be compiled: %v", err)
	}
	if n := len(prog.Inst); n > MaxInterceptPatternInsts {
		return fmt.Sprintf("compiles to %d instructions, over the bound of %d (large counted repetitions such as {1000} expand); simplify it", n, MaxInterceptPatternInsts)
	}
	return ""
}
