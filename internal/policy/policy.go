// Package policy owns mcpgw's access decisions: which tools, prompts and
// resources a principal may see and use (rules compiled from the policy:
// section of the config), the OAuth scopes a tool needs, rate limits and
// concurrency caps, and definition pinning against a lock file. It knows
// nothing of HTTP or sessions: the router asks it questions with a
// Principal it filled in from internal/auth, and turns the answers into
// JSON-RPC errors, challenges and filtered lists.
//
// # Rules
//
// A rule applies to a principal when every key of its match holds (within
// a key, any listed value will do): subjects (exact), groups (any shared),
// scopes (any held), client_ids, api_keys (names of auth.api_keys entries)
// and routes (route paths). A rule without match applies to everyone.
//
// Each allow and deny entry is a pattern (see package pattern): a glob over
// the name the client sees (namespaced tool and prompt names such as
// github__create_issue; resource URIs and URI templates such as
// fs+file:///data/a.md), with an optional kind prefix (tool:, prompt:,
// resource:) to restrict it to one kind.
//
// The decision, for a principal, route, kind and name:
//
//  1. deny wins: if any applicable rule has a deny pattern covering the
//     name, it is denied; the first such rule (in file order) is reported;
//  2. otherwise, if any applicable rule has an allow pattern covering it,
//     it is allowed by the first such rule;
//  3. otherwise policy.default decides (deny when auth is configured).
//
// An allowed tool that policy.tool_scopes requires scopes for is still
// refused when the principal lacks one (Decision.MissingScopes): the router
// answers with an insufficient_scope challenge rather than a plain denial,
// and the tool stays listed so the client can step up.
//
// Rule numbers in reasons are indexes into policy.rules: "rule 2" is
// policy.rules[2], counting from 0, as config problems are reported.
//
// # Conditions
//
// A rule may carry a CEL condition (when:, see package cond) over the
// principal, route, kind, name and the call's arguments. The rule applies
// only when its match and its condition hold. The condition is evaluated
// only when one of the rule's patterns covers the name. An evaluation
// error (a missing key, a cost or time limit) fails closed: the condition
// does not hold for the rule's allow patterns and does hold for its deny
// patterns.
//
// DecideCall decides a call, with its arguments. Decide decides without
// them, for lists: a condition that depends on the arguments is taken to
// hold for the rule's allow patterns (the name is listed; a call may still
// be refused) and not to hold for its deny patterns (the name is not
// hidden; a call may still be denied); Decision.Conditional reports it.
// Conditions that do not depend on the arguments are decided exactly as
// for a call. Hence the invariant: whenever DecideCall allows a call,
// Decide lists the name (and Decide(...).Allowed, for any arguments);
// a listed name whose call is denied is possible only through a condition
// on the arguments.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy/cond"
	"github.com/mcpgw/mcpgw/internal/policy/pattern"
	"github.com/mcpgw/mcpgw/internal/principal"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Kinds of names a decision is about.
const (
	KindTool     = pattern.KindTool
	KindPrompt   = pattern.KindPrompt
	KindResource = pattern.KindResource // resource URIs and URI templates
)

// Principal is who is asking, as authentication established it: the one
// principal.Principal, named here for the policy's callers. The zero value
// is anonymous; Key is what rate limits count by.
type Principal = principal.Principal

// prepared is p with its claims made ready for conditions: converted
// once for every input of a decision when authentication did not.
func prepared(p Principal) Principal {
	if p.PreparedClaims == nil {
		p.PreparedClaims = principal.NewClaims(p.Claims)
	}
	return p
}

// Decision is the answer for one name.
type Decision struct {
	// Allowed reports whether the request may go ahead.
	Allowed bool
	// Rule is the index in policy.rules of the deciding rule, or -1 when
	// the default decided.
	Rule int
	// Pattern is the allow or deny pattern that decided ("" for the default).
	Pattern string
	// MissingScopes, when set, are scopes the principal lacks for an
	// otherwise allowed tool (Allowed is false): answer with an
	// insufficient_scope challenge naming RequiredScopes.
	MissingScopes []string
	// Reason says in words what decided, e.g. "denied by rule 2 (match
	// groups [eng]): deny github__delete_*".
	Reason string
	// Conditional is set by Decide (never by DecideCall) when the answer
	// took a rule condition that depends on the call's arguments as
	// holding for an allow, or as not holding for a deny: the name is
	// listed, but a call to it may be refused.
	Conditional bool
}

// Listed reports whether the name appears in lists: it is allowed, or
// allowed but for missing scopes (so the client can step up). A hidden
// name is also refused when called.
func (d Decision) Listed() bool { return d.Allowed || len(d.MissingScopes) > 0 }

// Policy is a compiled, immutable policy. It is safe for concurrent use;
// swap a new one in to change it.
type Policy struct {
	allowByDefault bool
	rules          []rule
	toolScopes     []toolScope
	index          ruleIndex // which rules can bear on a decision (index.go)
	// argKeys are the members of a call's arguments that conditions read,
	// when argsWhole is not set; argsWhole: some condition reads the
	// arguments as a whole, so they are decoded whole.
	argKeys   []string
	argsWhole bool
	// argMembers are the member paths into a call's arguments that
	// conditions select (cond.Condition.ArgumentPaths): a case variant of
	// one makes the arguments unusable, as a duplicate does.
	argMembers *rawjson.Members
}

type rule struct {
	index                                                int
	subjects, groups, scopes, clientIDs, apiKeys, routes set
	when                                                 *cond.Condition // nil: none
	// subjectForms say which source each subject is from (subjects holds
	// the bare subjects, for the index and a quick test).
	subjectForms []subjectForm
	allow, deny  []pattern.Pattern
	// allowReasons and denyReasons are the Decision.Reason of each allow
	// and deny pattern deciding, made once: a decision is made for every
	// call and every listed item.
	allowReasons, denyReasons []string
	desc                      string
}

type toolScope struct {
	glob   pattern.Glob
	text   string
	scopes []string
}

type set map[string]bool

func newSet(vals []string) set {
	if len(vals) == 0 {
		return nil
	}
	s := set{}
	for _, v := range vals {
		s[v] = true
	}
	return s
}

// anyOf reports whether the set is unconstrained (nil) or holds one of vals.
func (s set) anyOf(vals ...string) bool {
	if s == nil {
		return true
	}
	for _, v := range vals {
		if s[v] {
			return true
		}
	}
	return false
}

// Compile builds a Policy from the policy: section of a config that
// config.Parse accepted. Errors only arise for a section that did not go
// through validation.
func Compile(pol *config.Policy) (*Policy, error) {
	if pol == nil {
		return nil, errors.New("policy: no policy section (config.Parse always sets one)")
	}
	p := &Policy{}
	switch pol.Default {
	case config.PolicyAllow:
		p.allowByDefault = true
	case config.PolicyDeny:
	default:
		return nil, fmt.Errorf("policy.default: %q is not allow or deny", pol.Default)
	}
	var errs []error
	// Conditions by text: large policies repeat a few over many rules, and
	// compiling one costs about a millisecond. A Condition is immutable,
	// so rules share it.
	type compiled struct {
		c   *cond.Condition
		err error
	}
	conds := map[string]compiled{}
	var argPaths [][]string
	for i, r := range pol.Rules {
		if r == nil {
			errs = append(errs, fmt.Errorf("policy.rules[%d]: empty rule", i))
			continue
		}
		cr := rule{index: i}
		if m := r.Match; m != nil {
			cr.subjects, cr.subjectForms = subjectsOf(m.Subjects)
			cr.groups, cr.scopes = newSet(m.Groups), newSet(m.Scopes)
			cr.clientIDs, cr.apiKeys, cr.routes = newSet(m.ClientIDs), newSet(m.APIKeys), newSet(m.Routes)
		}
		cr.desc = describeMatch(r.Match)
		if r.When != "" {
			cc, done := conds[r.When]
			if !done {
				cc.c, cc.err = cond.Compile(r.When)
				conds[r.When] = cc
			}
			c, err := cc.c, cc.err
			if c != nil {
				keys, whole := c.ArgumentKeys()
				p.argsWhole = p.argsWhole || whole
				argPaths = append(argPaths, c.ArgumentPaths()...)
				for _, k := range keys {
					if !slices.Contains(p.argKeys, k) {
						p.argKeys = append(p.argKeys, k)
					}
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("policy.rules[%d].when: %w", i, err))
			}
			cr.when = c
			cr.desc += " when " + strings.Join(strings.Fields(r.When), " ")
		}
		for j, s := range r.Allow {
			pat, err := pattern.Parse(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("policy.rules[%d].allow[%d]: %w", i, j, err))
			}
			cr.allow = append(cr.allow, pat)
		}
		for j, s := range r.Deny {
			pat, err := pattern.Parse(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("policy.rules[%d].deny[%d]: %w", i, j, err))
			}
			cr.deny = append(cr.deny, pat)
		}
		for _, pat := range cr.allow {
			cr.allowReasons = append(cr.allowReasons, "allowed by rule "+strconv.Itoa(i)+" ("+cr.desc+"): allow "+pat.Text)
		}
		for _, pat := range cr.deny {
			cr.denyReasons = append(cr.denyReasons, "denied by rule "+strconv.Itoa(i)+" ("+cr.desc+"): deny "+pat.Text)
		}
		p.rules = append(p.rules, cr)
	}
	for _, k := range sortedKeys(pol.ToolScopes) {
		g, err := pattern.Compile(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("policy.tool_scopes[%q]: %w", k, err))
			continue
		}
		p.toolScopes = append(p.toolScopes, toolScope{glob: g, text: k, scopes: slices.Clone(pol.ToolScopes[k])})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p.index = buildIndex(p.rules)
	p.argMembers = argumentMembers(argPaths)
	return p, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func describeMatch(m *config.PolicyMatch) string {
	if m == nil {
		return "matches everyone"
	}
	var parts []string
	for _, kv := range []struct {
		k string
		v []string
	}{
		{"subjects", m.Subjects}, {"groups", m.Groups}, {"scopes", m.Scopes},
		{"client_ids", m.ClientIDs}, {"api_keys", m.APIKeys}, {"routes", m.Routes},
	} {
		if len(kv.v) > 0 {
			parts = append(parts, fmt.Sprintf("%s [%s]", kv.k, strings.Join(kv.v, " ")))
		}
	}
	if len(parts) == 0 {
		return "matches everyone"
	}
	return "match " + strings.Join(parts, " ")
}

// subjectForm is one match.subjects entry (config.ParseSubject).
type subjectForm struct {
	source      config.SubjectSource
	issuer, sub string
}

// subjectsOf reads match.subjects: the bare subjects and their forms.
func subjectsOf(entries []string) (set, []subjectForm) {
	if len(entries) == 0 {
		return nil, nil
	}
	subs := set{}
	forms := make([]subjectForm, 0, len(entries))
	for _, e := range entries {
		src, iss, sub := config.ParseSubject(e)
		subs[sub] = true
		forms = append(forms, subjectForm{src, iss, sub})
	}
	return subs, forms
}

// subjectFrom reports whether one of the rule's subjects is p's, from the
// source it names: an API key's principal, or a token of one issuer.
func (r *rule) subjectFrom(p Principal) bool {
	if r.subjectForms == nil {
		return true
	}
	for _, f := range r.subjectForms {
		if f.sub != p.Subject {
			continue
		}
		switch f.source {
		case config.SubjectAny:
			return true
		case config.SubjectAPIKey:
			if p.APIKey != "" {
				return true
			}
		case config.SubjectIssuer:
			if p.APIKey == "" && p.Issuer == f.issuer {
				return true
			}
		}
	}
	return false
}

// applies reports whether the rule's match holds for p on route.
func (r *rule) applies(p Principal, route string) bool {
	return r.subjects.anyOf(p.Subject) && r.subjectFrom(p) && r.groups.anyOf(p.Groups...) && r.scopes.anyOf(p.Scopes...) &&
		r.clientIDs.anyOf(p.ClientID) && r.apiKeys.anyOf(p.APIKey) && r.routes.anyOf(route)
}

// Decide answers whether principal p, on the route with path route, may
// see the name of the given kind (KindTool, KindPrompt or KindResource):
// the decision for lists, without a call's arguments. name is what the
// client sees: a namespaced tool or prompt name, a resource URI or URI
// template. Rule conditions that depend on the arguments are taken the
// listing way (see the package comment): Decide lists every name that
// DecideCall would allow for some arguments. Decide a call with DecideCall.
func (pol *Policy) Decide(p Principal, route, kind, name string) Decision {
	return pol.decide(p, route, kind, name, nil, false, nil)
}

// Lister decides the names of lists for one principal on one route, as
// Decide does. A rule's condition that does not read name is judged once
// per kind for all of them, not once per name: use one Lister for the
// items of a list (or a search over them). Safe for concurrent use.
type Lister struct {
	pol   *Policy
	p     Principal
	route string
	mu    sync.Mutex
	known map[listKey]outcome // conditions judged, for names they do not read
}

type listKey struct {
	when *cond.Condition
	kind string
}

// Lister returns a Lister for principal p on the route with path route.
func (pol *Policy) Lister(p Principal, route string) *Lister {
	return &Lister{pol: pol, p: p, route: route}
}

// Decide is pol.Decide(p, route, kind, name).
func (l *Lister) Decide(kind, name string) Decision {
	return l.pol.decide(l.p, l.route, kind, name, nil, false, l)
}

// DecideCall answers whether principal p, on the route with path route,
// may call (or get, or read) the name of the given kind with arguments:
// params.arguments of a tools/call or prompts/get, raw as the client sent
// them; nil (or JSON null) when the request has none, and then conditions
// see an empty map. Arguments that are not a JSON object, or have a key
// twice in one object, make every condition that is evaluated fail
// (closed). Without conditions in the policy it equals Decide.
func (pol *Policy) DecideCall(p Principal, route, kind, name string, arguments json.RawMessage) Decision {
	return pol.decide(p, route, kind, name, arguments, true, nil)
}

// condInputs are the inputs of a decision's conditions (decide), with
// their memos, in one allocation.
type condInputs struct {
	base, withArgs     cond.Input
	baseMemo, argsMemo cond.Memo
}

// outcome is how a rule's condition turned out for one decision.
type outcome struct {
	allow, deny bool // whether it holds for the allow and the deny patterns
	maybe       bool // Decide only: it depends on the arguments
	err         error
}

// judge is eval(r), or what it gave for an earlier name of the list when
// r's condition does not read name.
func (l *Lister) judge(r *rule, kind string, eval func(*rule) outcome) outcome {
	if l == nil || r.when == nil || r.when.UsesName() {
		return eval(r)
	}
	k := listKey{r.when, kind}
	l.mu.Lock()
	o, ok := l.known[k]
	l.mu.Unlock()
	if ok {
		return o
	}
	o = eval(r) // unlocked: two names may judge it at once, alike
	l.mu.Lock()
	if l.known == nil {
		l.known = map[listKey]outcome{}
	}
	l.known[k] = o
	l.mu.Unlock()
	return o
}

// decide is Decide (call false, l set when a Lister asks) and DecideCall.
func (pol *Policy) decide(p Principal, route, kind, name string, rawArgs json.RawMessage, call bool, l *Lister) Decision {
	if kind != KindTool && kind != KindPrompt && kind != KindResource {
		return Decision{Rule: -1, Reason: fmt.Sprintf("denied: %q is not a kind the policy knows (tool, prompt, resource)", kind)}
	}
	// The conditions' inputs, built on first use and shared by every rule's
	// condition: base has no arguments (a list's are unknown; a condition
	// that does not read them ignores them), withArgs has the call's,
	// decoded only when a condition reads them.
	var (
		ins            *condInputs // base and withArgs, allocated at once
		base, withArgs *cond.Input
		argErr         error
	)
	// eval evaluates the condition of r; a rule without one always holds.
	eval := func(r *rule) outcome {
		if r.when == nil {
			return outcome{allow: true, deny: true}
		}

		if base == nil {
			ins = &condInputs{base: cond.Input{Principal: prepared(p), Route: route, Kind: kind, Name: name}}
			base = &ins.base
			base.MemoizeIn(&ins.baseMemo)
		}
		in := base
		if call && r.when.UsesArguments() {
			if withArgs == nil {
				withArgs = &ins.withArgs
				*withArgs = cond.Input{Principal: base.Principal, Route: route, Kind: kind, Name: name}
				if pol.argsWhole {
					withArgs.Arguments, argErr = parseArguments(rawArgs, pol.argMembers)
				} else {
					withArgs.Arguments, argErr = parseArgumentMembers(rawArgs, pol.argKeys, pol.argMembers)
				}
				withArgs.MemoizeIn(&ins.argsMemo)
			}
			in = withArgs
		}
		if !call {
			res, err := r.when.EvalWithoutArguments(*in)
			switch res {
			case cond.True:
				return outcome{allow: true, deny: true}
			case cond.Unknown:
				return outcome{allow: true, maybe: true, err: err}
			case cond.Error:
				return outcome{deny: true, err: err}
			}
			return outcome{}
		}
		if argErr != nil && r.when.UsesArguments() {
			// Unusable arguments: decided only if the arguments cannot
			// matter, as for a list; otherwise an evaluation error.
			switch res, _ := r.when.EvalWithoutArguments(*in); res {
			case cond.True:
				return outcome{allow: true, deny: true}
			case cond.False:
				return outcome{}
			}
			return outcome{deny: true, err: argErr}
		}
		ok, err := r.when.Eval(*in)
		if err != nil {
			return outcome{deny: true, err: err}
		}
		return outcome{allow: ok, deny: ok}
	}
	var (
		allow, maybeAllow  *rule
		allowPat, maybePat int  // indexes in allow.allow, maybeAllow.allow
		maybeDeny          bool // Decide: a deny that depends on the arguments did not hide the name
		notes              []string
	)
	note := func(r *rule, o outcome) {
		if o.err != nil && len(notes) < 3 {
			notes = append(notes, fmt.Sprintf("rule %d's condition failed: %v", r.index, o.err))
		}
	}
	var buf [64]int32
	for _, i := range pol.index.candidates(buf[:0], p, route, name) {
		r := &pol.rules[i]
		if !r.applies(p, route) {
			continue
		}
		var (
			o         outcome // this rule's condition, evaluated at most once
			evaluated bool
		)
		holds := func() outcome {
			if !evaluated {
				o, evaluated = l.judge(r, kind, eval), true
				note(r, o)
			}
			return o
		}
		for j, pat := range r.deny {
			if !pat.Match(kind, name) {
				continue
			}
			h := holds()
			if h.maybe {
				maybeDeny = true
			}
			if !h.deny {
				break
			}
			reason := r.denyReasons[j]
			if h.err != nil {
				reason += fmt.Sprintf(" (the condition failed, so the deny holds: %v)", h.err)
			}
			return Decision{Rule: r.index, Pattern: pat.Text, Reason: reason}
		}
		if allow != nil {
			continue
		}
		for j, pat := range r.allow {
			if !pat.Match(kind, name) {
				continue
			}
			h := holds()
			switch {
			case !h.allow:
			case h.maybe:
				if maybeAllow == nil {
					maybeAllow, maybePat = r, j
				}
			default:
				allow, allowPat = r, j
			}
			break
		}
	}
	var d Decision
	switch {
	case allow != nil:
		d = Decision{Allowed: true, Rule: allow.index, Pattern: allow.allow[allowPat].Text, Reason: allow.allowReasons[allowPat]}
	case maybeAllow != nil:
		d = Decision{Allowed: true, Rule: maybeAllow.index, Pattern: maybeAllow.allow[maybePat].Text,
			Reason: maybeAllow.allowReasons[maybePat] + ", if the call's arguments meet the condition"}
	case pol.allowByDefault:
		d = Decision{Allowed: true, Rule: -1, Reason: "allowed by default: no rule allows or denies " + kind + " " + name + " for this principal (default: allow)"}
	default:
		d = Decision{Rule: -1, Reason: "denied by default: no rule allows " + kind + " " + name + " for this principal (default: deny)"}
		if len(notes) > 0 {
			d.Reason += "; " + strings.Join(notes, "; ")
		}
		return d
	}
	if allow == nil && maybeAllow != nil {
		d.Conditional = true
	}
	if maybeDeny {
		d.Conditional = true
		d.Reason += "; a deny with a condition on the arguments may refuse some calls"
	}
	if kind == KindTool {
		if missing, from := pol.missingScopes(p, name); len(missing) > 0 {
			d.Allowed = false
			d.MissingScopes = missing
			d.Reason = fmt.Sprintf("needs scope %s (tool_scopes %s), which the principal lacks; otherwise %s",
				strings.Join(missing, " "), strings.Join(from, ", "), d.Reason)
		}
	}
	return d
}

// AllowsAll reports whether the policy allows every name to everyone: no
// rules, no tool_scopes, default allow (the policy of a config without a
// policy: section). Callers skip per-item filtering for it.
func (pol *Policy) AllowsAll() bool {
	return pol != nil && pol.allowByDefault && len(pol.rules) == 0 && len(pol.toolScopes) == 0
}

// RequiredScopes returns the scopes policy.tool_scopes requires for the
// tool name: the union over every matching entry, sorted; nil when none.
func (pol *Policy) RequiredScopes(name string) []string {
	var out []string
	for _, ts := range pol.toolScopes {
		if ts.glob.Match(name) {
			out = append(out, ts.scopes...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// missingScopes returns the required scopes p lacks for tool name, and the
// tool_scopes entries that required them.
func (pol *Policy) missingScopes(p Principal, name string) (missing, from []string) {
	for _, ts := range pol.toolScopes {
		if !ts.glob.Match(name) {
			continue
		}
		lacks := false
		for _, s := range ts.scopes {
			if !slices.Contains(p.Scopes, s) {
				missing = append(missing, s)
				lacks = true
			}
		}
		if lacks {
			from = append(from, ts.text)
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing), from
}

// MaySeeUnder reports whether p, on the route with path route, may be
// shown any name of kind that begins with prefix: an upstream's namespace
// on a prefixed route ("github__" for its tools, "github+" for its
// resources; "" on an unprefixed route, whose one upstream is the whole
// route). False only when no such name can be listed: a deny that holds
// for p covers them all, or no allow pattern can cover one and the default
// denies. It errs toward true (a partial deny, a condition on the name or
// the arguments), so what it hides is certainly hidden. The router uses it
// to keep an upstream's instructions, capabilities and name from a caller
// who may see nothing of it. One pass over the rules.
func (pol *Policy) MaySeeUnder(p Principal, route, kind, prefix string) bool {
	if pol == nil || pol.AllowsAll() {
		return true
	}
	may := pol.allowByDefault
	var in *cond.Input // built on first use, shared by the rules' conditions
	for i := range pol.rules {
		r := &pol.rules[i]
		if !r.applies(p, route) {
			continue
		}
		allowHolds, denyHolds := true, true
		if r.when != nil {
			if in == nil {
				in = &cond.Input{Principal: prepared(p), Route: route, Kind: kind}
			}
			allowHolds, denyHolds = true, false // a condition on the name: some name may pass it
			if !r.when.UsesName() {
				switch res, _ := r.when.EvalWithoutArguments(*in); res {
				case cond.True:
					allowHolds, denyHolds = true, true
				case cond.False:
					allowHolds = false
				case cond.Error: // fails closed, as decide does
					allowHolds, denyHolds = false, true
				}
			}
		}
		if denyHolds {
			for _, pat := range r.deny {
				if pat.MatchesAllPrefixed(kind, prefix) {
					return false // deny wins, whatever else allows
				}
			}
		}
		if allowHolds && !may {
			for _, pat := range r.allow {
				if pat.MayMatchPrefixed(kind, prefix) {
					may = true
					break
				}
			}
		}
	}
	return may
}
