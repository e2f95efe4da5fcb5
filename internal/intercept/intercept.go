// Package intercept runs the interceptors of the request path (issue 33,
// docs/interceptors.md): operator-configured steps that inspect, redact,
// refuse or rewrite what passes, in three phases — a request's judged
// member (a call's arguments, a read's URI), an upstream's result, and
// listed definitions.
//
// An interceptor never round-trips a payload through Go values: it edits
// JSON string tokens in place (walk.go), so every byte it does not change
// reaches the other side as it was (DESIGN invariant 1), and it reads a
// member in one pass with no copy unless it changes something. The core
// calls a Set from one stage of its chain (router/core/intercept.go); a
// route with no interceptor configured has no such stage.
package intercept

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy/pattern"
	"github.com/mcpgw/mcpgw/internal/principal"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Outcomes (the metrics' outcome label).
const (
	Allowed  = "allow"
	Modified = "modify"
	Denied   = "deny"
	Flagged  = "flag"
	Hidden   = "hide"
	Failed   = "fail_closed"
	Passed   = "fail_open"
)

// Metrics records interceptor decisions; nil records nothing.
type Metrics interface {
	InterceptDecision(name, phase, outcome string)
	InterceptLatency(name, phase string, d time.Duration)
	InterceptFailure(name, phase string)
}

// Options are a Set's dependencies.
type Options struct {
	Logger  *zap.Logger
	Metrics Metrics
	// Now is the clock for latencies (time.Now when nil).
	Now func() time.Time
}

// Target is what a member belongs to: its route, upstream, namespaced
// name (or resource URI), kind and caller.
type Target struct {
	Route, Upstream, Kind, Name string
	Principal                   *principal.Principal
	Method                      string
	// Unnamed: the tool is not known (a task's result, fetched by task
	// id). Built-in interceptors judge it whatever their tool patterns
	// (a secret is redacted, not let through for want of a name); an
	// external one only when it names no tool patterns, so its service
	// never receives data of a tool it is not configured for.
	Unnamed bool
}

// Outcome is what a phase's interceptors made of a member.
type Outcome struct {
	// Out is the member as it goes on (the input itself when unchanged).
	Out []byte
	// Changed: Out differs from the input.
	Changed bool
	// Denied: refuse it; By names the interceptor and Reason says why.
	Denied     bool
	By, Reason string
	// Notes are the interceptors that acted (name: outcome), for the
	// audit record.
	Notes []string
}

// Set is a generation's interceptors, by phase, in config order.
type Set struct {
	opts    Options
	byPhase map[string][]*interceptor
}

// interceptor is one configured interceptor.
type interceptor struct {
	cfg   *config.Interceptor
	tools []pattern.Pattern
	m     *matcher  // redact, deny_match
	ext   *external // external
}

// New compiles cfgs; it returns nil when there are none, so that a
// route's chain has no interceptor stage at all.
func New(cfgs []*config.Interceptor, opts Options) (*Set, error) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Set{opts: opts, byPhase: map[string][]*interceptor{}}
	for _, ic := range cfgs {
		it := &interceptor{cfg: ic}
		if ic.Match != nil {
			for _, t := range ic.Match.Tools {
				p, err := pattern.Parse(t)
				if err != nil {
					return nil, fmt.Errorf("interceptor %s: %w", ic.Name, err)
				}
				it.tools = append(it.tools, p)
			}
		}
		switch ic.Type {
		case config.InterceptRedact, config.InterceptDenyMatch:
			m, err := newMatcher(ic)
			if err != nil {
				return nil, err
			}
			it.m = m
		case config.InterceptExternal:
			x, err := newExternal(ic)
			if err != nil {
				return nil, err
			}
			it.ext = x
		}
		s.byPhase[ic.Phase] = append(s.byPhase[ic.Phase], it)
	}
	return s, nil
}

// Has reports whether any interceptor runs in phase (nil Set: none).
func (s *Set) Has(phase string) bool { return s != nil && len(s.byPhase[phase]) > 0 }

// applies reports whether it sees t.
func (it *interceptor) applies(t *Target) bool {
	m := it.cfg.Match
	if m == nil {
		return true
	}
	if len(m.Routes) > 0 && !slices.Contains(m.Routes, t.Route) {
		return false
	}
	if len(m.Upstreams) > 0 && !slices.Contains(m.Upstreams, t.Upstream) {
		return false
	}
	if len(it.tools) > 0 {
		if t.Unnamed {
			if it.ext != nil {
				return false
			}
		} else if !slices.ContainsFunc(it.tools, func(p pattern.Pattern) bool { return p.Match(t.Kind, t.Name) }) {
			return false
		}
	}
	if len(m.Groups) > 0 {
		if t.Principal == nil || !slices.ContainsFunc(m.Groups, func(g string) bool { return slices.Contains(t.Principal.Groups, g) }) {
			return false
		}
	}
	return true
}

// Applies reports whether any interceptor of phase sees t: the core asks
// before it reads anything for the phase.
func (s *Set) Applies(phase string, t *Target) bool {
	if s == nil {
		return false
	}
	for _, it := range s.byPhase[phase] {
		if it.applies(t) {
			return true
		}
	}
	return false
}

// record counts one decision and its latency.
func (s *Set) record(it *interceptor, phase, outcome string, start time.Time) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.InterceptDecision(it.cfg.Name, phase, outcome)
		s.opts.Metrics.InterceptLatency(it.cfg.Name, phase, s.opts.Now().Sub(start))
	}
}

// failure counts an external interceptor's failed call.
func (s *Set) failure(it *interceptor, phase string) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.InterceptFailure(it.cfg.Name, phase)
	}
}

// Request runs the request phase over member: a call's arguments (an
// object) or a read's URI (a JSON string).
func (s *Set) Request(ctx context.Context, t *Target, member []byte) Outcome {
	return s.run(ctx, config.PhaseRequest, t, member, nil)
}

// resultMembers are the members of a result an interceptor judges: a
// tool result's content and structuredContent, a resource's contents, a
// prompt's messages. Matched ignoring case, as a lenient client reads
// them; duplicates are each judged.
var resultMembers = [...]string{"content", "structuredContent", "contents", "messages"}

// Result runs the result phase over result (a JSON-RPC result object).
func (s *Set) Result(ctx context.Context, t *Target, result []byte) Outcome {
	return s.run(ctx, config.PhaseResult, t, result, resultMembers[:])
}

// run runs phase's interceptors that see t, in order, over member; only
// the members named (nil: all of it) are judged by the built-ins.
func (s *Set) run(ctx context.Context, phase string, t *Target, member []byte, members []string) Outcome {
	o := Outcome{Out: member}
	for _, it := range s.byPhase[phase] {
		if !it.applies(t) {
			continue
		}
		start := s.opts.Now()
		outcome, out, reason := it.judge(ctx, phase, t, o.Out, members)
		s.record(it, phase, outcome, start)
		if outcome != Allowed {
			o.Notes = append(o.Notes, it.cfg.Name+": "+outcome)
		}
		if outcome == Failed {
			s.failure(it, phase)
		}
		switch outcome {
		case Denied, Failed:
			o.Denied, o.By, o.Reason = true, it.cfg.Name, reason
			return o
		case Modified:
			o.Out, o.Changed = out, true
		case Passed:
			s.failure(it, phase)
			s.opts.Logger.Warn("interceptor failed; passing unjudged (fail: open)", zap.String("interceptor", it.cfg.Name), zap.String("reason", reason))
		}
	}
	return o
}

// judge runs one interceptor over member.
func (it *interceptor) judge(ctx context.Context, phase string, t *Target, member []byte, members []string) (outcome string, out []byte, reason string) {
	ic := it.cfg
	switch ic.Type {
	case config.InterceptMaxSize:
		if int64(len(member)) > ic.MaxBytes {
			r := ic.Reason
			if r == "" {
				r = fmt.Sprintf("%d bytes is over the %d allowed", len(member), ic.MaxBytes)
			}
			return Denied, nil, r
		}
		return Allowed, nil, ""
	case config.InterceptDenyMatch:
		hit := false
		err := eachSpan(member, members, func(e *editor, from, to int) error {
			return e.walk(from, to, func(s []byte) bool {
				if !hit && it.m.matches(s) {
					hit = true
				}
				return false
			})
		})
		if err != nil {
			return Denied, nil, err.Error()
		}
		if hit {
			r := ic.Reason
			if r == "" {
				r = "it matches a pattern the operator refuses"
			}
			return Denied, nil, r
		}
		return Allowed, nil, ""
	case config.InterceptRedact:
		r := &redactor{m: it.m, repl: []byte(ic.Replacement)}
		var e *editor
		err := eachSpan(member, members, func(ed *editor, from, to int) error {
			e, r.e = ed, ed
			return ed.walk(from, to, r.apply)
		})
		if err != nil {
			return Denied, nil, err.Error()
		}
		if e == nil {
			return Allowed, nil, ""
		}
		if res, changed := e.result(); changed {
			return Modified, res, ""
		}
		return Allowed, nil, ""
	case config.InterceptExternal:
		return it.ext.judge(ctx, phase, t, member)
	}
	return Allowed, nil, ""
}

// eachSpan runs fn over the spans of member to judge, with one editor
// for all of them: the members named (top-level keys of an object,
// matched ignoring case), or all of member when names is nil.
func eachSpan(member []byte, names []string, fn func(e *editor, from, to int) error) error {
	e := &editor{src: member}
	if names == nil {
		return fn(e, 0, len(member))
	}
	var ferr error
	err := rawjson.EachField(member, func(f rawjson.Field) bool {
		if slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, f.Key) }) {
			ferr = fn(e, f.Start, f.End)
		}
		return ferr == nil
	})
	if err != nil {
		return errSyntax
	}
	return ferr
}

// Step is what one interceptor made of a member in a dry run (Explain).
type Step struct {
	Name, Type, Outcome, Reason string
}

// Explain runs phase over member as Request and Result do, without
// calling any external service (a dry run must not send data anywhere):
// it reports each interceptor's step and the member as it would go on.
func (s *Set) Explain(ctx context.Context, phase string, t *Target, member []byte) ([]Step, Outcome) {
	var members []string
	if phase == config.PhaseResult {
		members = resultMembers[:]
	}
	o := Outcome{Out: member}
	var steps []Step
	for _, it := range s.byPhase[phase] {
		st := Step{Name: it.cfg.Name, Type: it.cfg.Type}
		switch {
		case !it.applies(t):
			st.Outcome = "not matched"
		case it.ext != nil:
			st.Outcome, st.Reason = "not called", "a dry run sends nothing to "+it.cfg.URL
		default:
			outcome, out, reason := it.judge(ctx, phase, t, o.Out, members)
			st.Outcome, st.Reason = outcome, reason
			if outcome == Modified {
				o.Out, o.Changed = out, true
			}
			if outcome == Denied {
				o.Denied, o.By, o.Reason = true, it.cfg.Name, reason
			}
		}
		steps = append(steps, st)
		if o.Denied {
			break
		}
	}
	return steps, o
}
