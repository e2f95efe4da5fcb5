// Package curate applies tool curation (routes[].tools.curate,
// upstreams.<name>.curate; docs/curation.md) in its two places: a listed
// tool definition is rewritten by byte-span edits (Definition), and a
// call's arguments are checked and completed (Arguments). A Set is made
// once per route and generation and is read-only after: it is shared by
// every request of the route.
package curate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/principal"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Set is one route's curation: its own rules (matched by the route's
// names) over its upstreams' (matched by their own names).
type Set struct {
	route   []*config.ToolCuration
	ups     map[string][]*config.ToolCuration
	expose  []string
	display func(upstream, name string) string
	// renamed maps a curated name to the route's name it stands for;
	// renames the route's name (or, for an upstream rule, "up\x00name")
	// to its curated name.
	renamed map[string]string
	renames map[string]string
}

// New makes the curation of a route whose names display gives (the
// upstream's name for its tool, as the route lists it); nil when nothing
// is curated.
func New(route []*config.ToolCuration, expose []string, ups map[string][]*config.ToolCuration, display func(upstream, name string) string) *Set {
	if len(route) == 0 && len(expose) == 0 && len(ups) == 0 {
		return nil
	}
	s := &Set{route: route, ups: ups, expose: expose, display: display, renamed: map[string]string{}, renames: map[string]string{}}
	for up, rules := range ups {
		for _, r := range rules {
			if r != nil && r.Rename != "" {
				s.renames[up+"\x00"+r.Tool] = r.Rename
			}
		}
	}
	for _, r := range route {
		if r != nil && r.Rename != "" {
			s.renames[r.Tool] = r.Rename
		}
	}
	for k, to := range s.renames {
		if up, name, ok := strings.Cut(k, "\x00"); ok {
			s.renamed[to] = display(up, name)
		} else {
			s.renamed[to] = k
		}
	}
	return s
}

// Tool is the effective curation of one tool.
type Tool struct {
	Upstream, Internal string // the upstream's tool
	Name               string // the route's name for it, uncurated
	Rename             string
	Title, Description *config.TextEdit
	Annotations        map[string]bool
	Params             map[string]*config.ParamCuration
}

// For returns the curation of upstream's tool internal (named name on the
// route); nil when none applies. The first matching rule of each list
// counts; the route's wins over the upstream's, field by field and
// parameter by parameter.
func (s *Set) For(upstream, internal string) *Tool {
	if s == nil {
		return nil
	}
	name := s.display(upstream, internal)
	var ur, rr *config.ToolCuration
	for _, r := range s.ups[upstream] {
		if r != nil && config.MatchGlob(r.Tool, internal) {
			ur = r
			break
		}
	}
	for _, r := range s.route {
		if r != nil && config.MatchGlob(r.Tool, name) {
			rr = r
			break
		}
	}
	if ur == nil && rr == nil {
		return nil
	}
	t := &Tool{Upstream: upstream, Internal: internal, Name: name, Params: map[string]*config.ParamCuration{}}
	for _, r := range []*config.ToolCuration{ur, rr} {
		if r == nil {
			continue
		}
		if r.Rename != "" {
			t.Rename = r.Rename
		}
		if r.Title != nil {
			t.Title = r.Title
		}
		if r.Description != nil {
			t.Description = r.Description
		}
		for k, v := range r.Annotations {
			if t.Annotations == nil {
				t.Annotations = map[string]bool{}
			}
			t.Annotations[k] = v
		}
		for k, v := range r.Parameters {
			t.Params[k] = v
		}
	}
	return t
}

// Exposed reports whether the route shows the tool it names name.
func (s *Set) Exposed(name string) bool {
	if s == nil || len(s.expose) == 0 {
		return true
	}
	for _, e := range s.expose {
		if config.MatchGlob(e, name) {
			return true
		}
	}
	return false
}

// Renames maps each curated name to the route's own name for its tool
// (a copy; nil when nothing is renamed).
func (s *Set) Renames() map[string]string {
	if s == nil || len(s.renamed) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.renamed))
	for k, v := range s.renamed {
		out[k] = v
	}
	return out
}

// Curated returns the route's (uncurated) name for a curated name.
func (s *Set) Curated(name string) (string, bool) {
	if s == nil {
		return "", false
	}
	n, ok := s.renamed[name]
	return n, ok
}

// Renamed reports whether upstream's tool internal has a curated name on
// the route (its own name is then unknown there).
func (s *Set) Renamed(upstream, internal string) (string, bool) {
	if s == nil {
		return "", false
	}
	if to, ok := s.renames[s.display(upstream, internal)]; ok {
		return to, true
	}
	to, ok := s.renames[upstream+"\x00"+internal]
	return to, ok
}

func edit(old string, e *config.TextEdit) string {
	if e.Replace != "" {
		old = e.Replace
	}
	return e.Prepend + old + e.Append
}

// Definition rewrites one listed tool definition (already named for the
// route) by byte-span edits: the name, title, description, annotations and
// the inputSchema's curated parameters; every other byte is the
// upstream's. missing names the fixed parameters the schema does not
// have.
func (t *Tool) Definition(def []byte) (out []byte, missing []string, err error) {
	out = def
	if t.Rename != "" {
		if out, err = rawjson.SetString(out, "name", t.Rename); err != nil {
			return nil, nil, err
		}
	}
	for key, e := range map[string]*config.TextEdit{"title": t.Title, "description": t.Description} {
		if e == nil {
			continue
		}
		old, _ := rawjson.GetString(out, key)
		if out, err = rawjson.SetString(out, key, edit(old, e)); err != nil {
			return nil, nil, err
		}
	}
	if len(t.Annotations) > 0 {
		ann, ok := rawjson.Get(out, "annotations")
		if !ok || len(ann) == 0 || ann[0] != '{' {
			ann = []byte(`{}`)
		}
		for _, k := range sortedKeys(t.Annotations) {
			if ann, err = rawjson.Set(ann, k, []byte(fmt.Sprint(t.Annotations[k]))); err != nil {
				return nil, nil, err
			}
		}
		if out, err = rawjson.Set(out, "annotations", ann); err != nil {
			return nil, nil, err
		}
	}
	if len(t.Params) == 0 {
		return out, nil, nil
	}
	schema, ok := rawjson.Get(out, "inputSchema")
	if !ok || len(schema) == 0 || schema[0] != '{' {
		return out, nil, nil
	}
	props, _ := rawjson.Get(schema, "properties")
	if len(props) == 0 || props[0] != '{' {
		props = nil
	}
	for _, name := range sortedKeys(t.Params) {
		pc := t.Params[name]
		prop, has := []byte(nil), false
		if props != nil {
			prop, has = rawjson.Get(props, name)
		}
		switch {
		case pc.Fixed != nil || pc.Hide:
			if !has {
				if pc.Fixed != nil {
					missing = append(missing, name)
				}
				continue
			}
			if props, err = rawjson.Delete(props, name); err != nil {
				return nil, nil, err
			}
			continue
		case !has || len(prop) == 0 || prop[0] != '{':
			continue
		}
		if pc.Default != nil && !pc.Default.PrincipalRef() {
			if prop, err = rawjson.Set(prop, "default", pc.Default.JSON); err != nil {
				return nil, nil, err
			}
		}
		if pc.Describe != "" {
			if prop, err = rawjson.SetString(prop, "description", pc.Describe); err != nil {
				return nil, nil, err
			}
		}
		if props, err = rawjson.Set(props, name, prop); err != nil {
			return nil, nil, err
		}
	}
	if props != nil {
		if schema, err = rawjson.Set(schema, "properties", props); err != nil {
			return nil, nil, err
		}
	}
	// A parameter the caller may not send (fixed, hidden) or need not
	// send (the gateway fills its default) is not required of it.
	var optional []string
	for _, name := range sortedKeys(t.Params) {
		if pc := t.Params[name]; pc.Fixed != nil || pc.Hide || pc.Default != nil {
			optional = append(optional, name)
		}
	}
	if req, ok := rawjson.Get(schema, "required"); ok && len(req) > 0 && req[0] == '[' {
		kept, left, err := dropElements(req, optional)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case left == 0:
			// Removed rather than left empty: draft-04 schemas require
			// at least one element (minItems 1), and an absent
			// "required" means the same in every draft and SDK.
			schema, err = rawjson.Delete(schema, "required")
		case len(kept) != len(req):
			schema, err = rawjson.Set(schema, "required", kept)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	out, err = rawjson.Set(out, "inputSchema", schema)
	return out, missing, err
}

// Arguments checks a call's arguments and completes them: a fixed or
// hidden parameter sent by the caller — in any case, any number of times —
// is refused (nothing is forwarded); fixed values are set, defaults filled
// where absent. p is the caller, for ${principal.…} values.
func (t *Tool) Arguments(args []byte, p *principal.Principal) ([]byte, *jsonrpc.Error) {
	if len(t.Params) == 0 {
		return args, nil
	}
	if len(args) == 0 || string(args) == "null" {
		args = []byte(`{}`)
	}
	fields, err := rawjson.Fields(args)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "tools/call: arguments must be an object: %v", err)
	}
	present := map[string]bool{}
	for _, f := range fields {
		present[f.Key] = true
		for name, pc := range t.Params {
			if (pc.Fixed != nil || pc.Hide) && strings.EqualFold(f.Key, name) {
				why := "hidden"
				if pc.Fixed != nil {
					why = "fixed"
				}
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "tools/call %s: parameter %q is %s by the gateway on this route and may not be sent; call the tool without it", t.shown(), f.Key, why)
			}
		}
	}
	out := args
	for _, name := range sortedKeys(t.Params) {
		pc := t.Params[name]
		v := pc.Fixed
		if v == nil && !present[name] {
			v = pc.Default
		}
		if v == nil {
			continue
		}
		val, jerr := t.value(name, v, p)
		if jerr != nil {
			return nil, jerr
		}
		if out, err = rawjson.Set(out, name, val); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "tools/call %s: %v", t.shown(), err)
		}
	}
	return out, nil
}

func (t *Tool) shown() string {
	if t.Rename != "" {
		return t.Rename
	}
	return t.Name
}

// value is v with the caller's principal filled in.
func (t *Tool) value(name string, v *config.CurateValue, p *principal.Principal) (json.RawMessage, *jsonrpc.Error) {
	if !v.PrincipalRef() {
		return v.JSON, nil
	}
	var s string
	if json.Unmarshal(v.JSON, &s) != nil {
		return v.JSON, nil // a reference inside an object or array is not filled
	}
	var missing string
	for {
		i := strings.Index(s, "${principal.")
		if i < 0 {
			break
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			break
		}
		ref := s[i+len("${principal.") : i+end]
		val, ok := lookup(p, ref)
		if !ok {
			missing = ref
			break
		}
		s = s[:i] + val + s[i+end+1:]
	}
	if missing != "" {
		// Fail closed: a value the caller's identity does not give is
		// not sent as an empty or literal string.
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "tools/call %s: parameter %q takes the caller's principal.%s, which this caller's credential does not carry", t.shown(), name, missing)
	}
	b, _ := json.Marshal(s)
	return b, nil
}

func lookup(p *principal.Principal, ref string) (string, bool) {
	if p == nil {
		return "", false
	}
	if ref == "subject" {
		return p.Subject, p.Subject != ""
	}
	if c, ok := strings.CutPrefix(ref, "claims."); ok {
		switch v := p.Claims[c].(type) {
		case string:
			return v, v != ""
		case float64, bool:
			return fmt.Sprint(v), true
		}
	}
	return "", false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dropElements removes from the JSON array arr the strings in names, by
// byte-span edits (every other byte, spacing included, stays), and
// reports how many elements are left.
func dropElements(arr []byte, names []string) ([]byte, int, error) {
	for {
		els, err := rawjson.Elements(arr)
		if err != nil {
			return nil, 0, err
		}
		i := slices.IndexFunc(els, func(e []byte) bool {
			var n string
			return json.Unmarshal(e, &n) == nil && contains(names, n)
		})
		if i < 0 {
			return arr, len(els), nil
		}
		// An element is a sub-slice of arr: its offset is what its
		// capacity lacks of arr's.
		start := func(k int) int { return cap(arr) - cap(els[k]) }
		end := func(k int) int { return start(k) + len(els[k]) }
		// From the end of the previous element (or this one's start) to
		// the end of this one (or the next one's start): the separating
		// comma goes with it.
		var cut0, cut1 int
		switch {
		case i > 0:
			cut0, cut1 = end(i-1), end(i)
		case len(els) > 1:
			cut0, cut1 = start(0), start(1)
		default:
			cut0, cut1 = start(0), end(0)
		}
		out := make([]byte, 0, len(arr))
		out = append(out, arr[:cut0]...)
		arr = append(out, arr[cut1:]...)
	}
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// Same reports whether s and o curate alike (a reload that changes
// neither needs no list_changed for it).
func (s *Set) Same(o *Set) bool {
	if s == nil || o == nil {
		return s == o
	}
	return reflect.DeepEqual(s.route, o.route) && reflect.DeepEqual(s.ups, o.ups) && reflect.DeepEqual(s.expose, o.expose)
}
