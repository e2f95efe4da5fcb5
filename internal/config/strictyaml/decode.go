// Package strictyaml decodes a YAML document into Go structs by their
// yaml tags, strictly: every unknown key, type error and failed ${VAR}
// expansion is reported with its line and path, all of them at once, and
// decoding goes on after a mistake. It knows nothing of mcpgw's config; the
// config package gives it the types and reads back what was set.
package strictyaml

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxValues bounds how many YAML values one decode visits, so a small file
// that multiplies itself through aliases ("billion laughs") cannot stall a
// config reload.
const maxValues = 100_000

// Decoder walks a yaml.Node tree against Go types by reflection, following
// the yaml struct tags. Doing the walk ourselves (rather than yaml.v3's
// Decode with KnownFields) lets it report every unknown key and type error
// with its line and path, expand ${VAR} only in scalar values, and keep going
// after a mistake.
type Decoder struct {
	env      func(string) (string, bool)
	problems Problems
	// lines maps a path to the line that sets it, so validation problems
	// found later can point into the file.
	lines map[string]int
	// set holds the paths given a non-null value, which tells an explicit
	// zero (an error for a timeout) from an absent key (defaulted).
	set map[string]bool
	// failed holds the paths whose value could not be decoded; validation
	// keeps quiet about them, since it would only see a zero value.
	failed []string
	// active holds the anchors being decoded through an alias or merged
	// with "<<", to catch an anchor that refers to itself. (Config's types
	// never nest a value in itself, so such a value fails on its type first;
	// merges can loop, and the alias check is cheap insurance.)
	active map[*yaml.Node]bool
	budget int
}

func New(env func(string) (string, bool)) *Decoder {
	return &Decoder{
		env:    env,
		lines:  map[string]int{},
		set:    map[string]bool{},
		active: map[*yaml.Node]bool{},
		budget: maxValues,
	}
}

func (d *Decoder) add(line int, path, msg string) {
	d.problems = append(d.problems, Problem{Line: line, Path: path, Msg: msg})
}

// fail records a problem for a value that could not be decoded.
func (d *Decoder) fail(line int, path, msg string) {
	d.add(line, path, msg)
	d.failed = append(d.failed, path)
}

// spend takes one unit of the value budget and reports whether any is left.
func (d *Decoder) spend(n *yaml.Node) bool {
	d.budget--
	if d.budget == -1 {
		// Failing the root keeps validation from reporting the values that
		// were never decoded.
		d.fail(n.Line, "", fmt.Sprintf("the document expands to more than %d values (through aliases and merges?); write it out plainly", maxValues))
	}
	return d.budget >= 0
}

// decode stores node n into v, which must be settable.
func (d *Decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.spend(n) {
		return
	}
	if n.Kind == yaml.AliasNode {
		target := n.Alias
		if d.active[target] {
			d.fail(n.Line, path, fmt.Sprintf("alias *%s is used inside its own anchor &%s, which would repeat forever; point it at another anchor", n.Value, n.Value))
			return
		}
		d.active[target] = true
		d.decode(target, v, path)
		delete(d.active, target)
		return
	}
	if isNull(n) {
		// An empty value ("key:" or "~") leaves the zero value: nil for an
		// optional section, which then gets its defaults.
		v.SetZero()
		return
	}
	d.set[path] = true
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	}
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok {
		d.unmarshaler(n, u, path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Map:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.sequence(n, v, path)
	default:
		d.scalar(n, v, path)
	}
}

func (d *Decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, v.Type(), path)
		return
	}
	index, names := Fields(v.Type())
	for _, p := range d.pairs(n, path) {
		kp := JoinPath(path, p.name)
		i, ok := index[p.name]
		if !ok {
			d.add(p.key.Line, kp, unknownKey(p.name, names))
			continue
		}
		d.lines[kp] = p.key.Line
		d.decode(p.val, v.Field(i), kp)
	}
}

func (d *Decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, v.Type(), path)
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, p := range d.pairs(n, path) {
		kp := JoinPath(path, p.name)
		d.lines[kp] = p.key.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(p.val, elem, kp)
		v.SetMapIndex(reflect.ValueOf(p.name).Convert(v.Type().Key()), elem)
	}
}

func (d *Decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.typeError(n, v.Type(), path)
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		d.lines[ip] = item.Line
		d.decode(item, s.Index(i), ip)
	}
	v.Set(s)
}

func (d *Decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.typeError(n, v.Type(), path)
		return
	}
	s, ok := d.expand(n, path)
	if !ok {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		// YAML 1.2 booleans only: "yes"/"on" are too easy to write by accident.
		switch s {
		case "true", "True", "TRUE":
			v.SetBool(true)
		case "false", "False", "FALSE":
			v.SetBool(false)
		default:
			d.fail(n.Line, path, fmt.Sprintf("want true or false, got %s; write true or false", quoteValue(n, s)))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := parseInt(s, v.Type().Bits())
		if err != nil {
			d.fail(n.Line, path, fmt.Sprintf("want a whole number, got %s; write digits only (at most %d bits), e.g. 4194304", quoteValue(n, s), v.Type().Bits()))
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(n.Line, path, fmt.Sprintf("want a number, got %s; write e.g. 0.25", quoteValue(n, s)))
			return
		}
		v.SetFloat(f)
	default:
		// Only reachable if a field of a type this decoder does not know is
		// added to Config; the tests decode every field.
		d.fail(n.Line, path, fmt.Sprintf("internal error: cannot decode into %s; please report this", v.Type()))
	}
}

// unmarshaler hands the node to a type's own UnmarshalYAML, after expanding
// ${VAR} in a scalar.
func (d *Decoder) unmarshaler(n *yaml.Node, u yaml.Unmarshaler, path string) {
	// Work on a copy: an anchored node can be decoded more than once through
	// aliases and must not be expanded twice.
	c := *n
	if n.Kind == yaml.ScalarNode {
		s, ok := d.expand(n, path)
		if !ok {
			return
		}
		if s != n.Value {
			c.Value, c.Tag = s, "" // let yaml re-resolve the expanded text
		}
	}
	if err := u.UnmarshalYAML(&c); err != nil {
		d.fail(n.Line, path, err.Error())
	}
}

// expand applies ${VAR} expansion to a scalar's value. It reports false after
// recording the problems when a reference cannot be expanded.
func (d *Decoder) expand(n *yaml.Node, path string) (string, bool) {
	s, errs := expandVars(n.Value, d.env)
	if strings.Contains(n.Value, "${principal.") && !strings.Contains(path, "curate[") {
		// Left unexpanded for request time only where a setting fills it
		// (tool curation's parameter values); anywhere else it would be
		// sent as written.
		errs = append(errs, "${principal.…} is filled per call only in tool curation's parameter values (curate[].parameters); here write ${NAME} for an environment variable, or $$ for a literal $")
	}
	for _, e := range errs {
		d.fail(n.Line, path, e)
	}
	return s, len(errs) == 0
}

// pair is one key: value entry of a mapping, after merging "<<" keys.
type pair struct {
	key, val *yaml.Node
	name     string
}

// pairs returns a mapping's entries. Keys set twice are problems. Keys
// merged in with "<<: *anchor" fill in only what the mapping does not set
// itself, the first merged source winning, as YAML's merge key specifies.
func (d *Decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	seen := map[string]int{} // name -> line
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !d.spend(n) {
			return out
		}
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode && k.Alias != nil && k.Alias.Kind == yaml.ScalarNode {
			k = k.Alias
		}
		if isMerge(k) {
			merges = append(merges, val)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.add(k.Line, path, "a key must be a plain name, not a list or mapping; check the indentation")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(k.Line, JoinPath(path, k.Value), fmt.Sprintf("key %q is set twice (first on line %d); keep one", k.Value, first))
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, pair{key: k, val: val, name: k.Value})
	}
	for _, m := range merges {
		for _, src := range d.mergeSources(m, path) {
			if d.active[src] {
				d.add(src.Line, path, "<< merges a mapping into itself; point it at another anchor")
				continue
			}
			d.active[src] = true
			for _, p := range d.pairs(src, path) {
				if _, dup := seen[p.name]; !dup {
					seen[p.name] = p.key.Line
					out = append(out, p)
				}
			}
			delete(d.active, src)
		}
	}
	return out
}

// mergeSources returns the mappings a "<<" value names: one mapping, an
// alias to one, or a list of them.
func (d *Decoder) mergeSources(m *yaml.Node, path string) []*yaml.Node {
	items := []*yaml.Node{m}
	if m.Kind == yaml.SequenceNode {
		items = m.Content
	}
	var out []*yaml.Node
	for _, it := range items {
		if !d.spend(it) {
			return out
		}
		if it.Kind == yaml.AliasNode {
			it = it.Alias
		}
		if it.Kind != yaml.MappingNode {
			d.add(it.Line, path, "<< merges mappings only; write <<: *anchor where &anchor names a mapping")
			continue
		}
		out = append(out, it)
	}
	return out
}

// typeError reports a value of the wrong shape for typ.
func (d *Decoder) typeError(n *yaml.Node, typ reflect.Type, path string) {
	var want, fix string
	switch typ.Kind() {
	case reflect.Struct, reflect.Map:
		want, fix = "a mapping of key: value pairs", "write the keys on their own lines, indented under this one"
		if path == "" {
			want, fix = "a mapping of settings at the top level", "start the file with keys such as listen: and upstreams:"
		}
	case reflect.Slice:
		want, fix = "a list", `write [a, b] or one "- item" per line`
		elem := typ.Elem()
		if elem.Kind() == reflect.Pointer {
			elem = elem.Elem()
		}
		switch {
		case elem.Kind() == reflect.Struct:
			fix = `write one "- key: value" item per line, with the item's other keys indented under it`
		case n.Kind == yaml.ScalarNode && elem.Kind() == reflect.String:
			fix = fmt.Sprintf("write it as a list, e.g. [%s]", strings.Join(strings.Fields(n.Value), ", "))
		}
	default:
		want, fix = "a single value", "write one value after the colon, quoted if it contains special characters"
	}
	d.fail(n.Line, path, fmt.Sprintf("want %s, got %s; %s", want, Describe(n), fix))
}

// Describe names what a node holds, for "want X, got Y" messages.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return quoteValue(n, n.Value)
	}
}

// quoteValue quotes a scalar for a message, noting the original text when
// ${VAR} expansion changed it and keeping long values short.
func quoteValue(n *yaml.Node, expanded string) string {
	const max = 60
	short := func(s string) string {
		if len(s) > max {
			s = s[:max] + "..."
		}
		return strconv.Quote(s)
	}
	if expanded != n.Value {
		return fmt.Sprintf("%s (from %s)", short(expanded), short(n.Value))
	}
	return short(expanded)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// isMerge reports whether a key is YAML's merge key "<<" (not a quoted "<<").
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge"
}

// parseInt reads a YAML 1.2 integer: decimal, or 0x/0o/0b prefixed.
func parseInt(s string, bits int) (int64, error) {
	digits := strings.TrimLeft(s, "+-")
	if len(digits) > 1 && digits[0] == '0' && strings.ContainsRune("xXoObB", rune(digits[1])) {
		return strconv.ParseInt(s, 0, bits)
	}
	return strconv.ParseInt(s, 10, bits)
}

// Fields maps a struct type's YAML keys to field indexes, and lists the
// keys in declaration order for messages.
func Fields(t reflect.Type) (map[string]int, []string) {
	index := map[string]int{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name) // yaml.v3's default
		}
		index[name] = i
		names = append(names, name)
	}
	return index, names
}

// unknownKey explains an unknown key and suggests the closest known one.
func unknownKey(name string, known []string) string {
	if s := Closest(name, known); s != "" {
		return fmt.Sprintf("unknown key %q; did you mean %q?", name, s)
	}
	return fmt.Sprintf("unknown key %q; remove it or use one of: %s", name, strings.Join(known, ", "))
}

// JoinPath appends a key to a path, quoting keys that are not plain words
// so that paths stay unambiguous (upstreams["a.b"].url).
func JoinPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	default:
		return path + "." + key
	}
}

// ParentPath strips the last element of a path made by joinPath or an index.
func ParentPath(p string) string {
	if strings.HasSuffix(p, `"]`) {
		if i := strings.LastIndex(p, `["`); i >= 0 {
			return p[:i]
		}
	}
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// how to fix it.
type Problem struct {
	// File is the name given to Parse (the path for Load); may be empty.
	File string
	// Line is 1-based; 0 when the problem has no single location.
	Line int
	// Path locates the value, e.g. "upstreams.fs.command[0]"; empty for the
	// whole file.
	Path string
	Msg  string
}

// String formats the problem as FILE:LINE: PATH: MESSAGE, leaving out the
// parts that are unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found in a config file. Parse returns all of
// them at once so an operator can fix a file in one pass.
type Problems []Problem

// Error prints one problem per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Problems returns what decoding found wrong, in the order found.
func (d *Decoder) Problems() Problems { return d.problems }

// Set reports whether path was given a non-null value: an explicit zero
// (an error for a timeout) is told from an absent key (defaulted).
func (d *Decoder) Set(path string) bool { return d.set[path] }

// Line returns the line that sets path.
func (d *Decoder) Line(path string) (int, bool) {
	l, ok := d.lines[path]
	return l, ok
}

// Failed returns the paths whose value could not be decoded: validation
// keeps quiet about them, since it would only see a zero value.
func (d *Decoder) Failed() []string { return d.failed }

// Decode decodes n into v (a settable struct value) at path ("" for the
// document).
func (d *Decoder) Decode(n *yaml.Node, v reflect.Value, path string) { d.decode(n, v, path) }

// Closest returns the candidate nearest to s by edit distance (ignoring
// case), or "" when none is near enough to be a plausible typo.
func Closest(s string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := max(1, len(s)/3)
	if best == "" || bestDist > limit {
		return ""
	}
	return best
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and adjacent transpositions ("headres") cost 1.
func editDistance(a, b string) int {
	ar, br := []rune(a), []rune(b)
	// Three rolling rows: two back for transpositions.
	prev2 := make([]int, len(br)+1)
	prev := make([]int, len(br)+1)
	cur := make([]int, len(br)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ar); i++ {
		cur[0] = i
		for j := 1; j <= len(br); j++ {
			cost := 1
			if ar[i-1] == br[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ar[i-1] == br[j-2] && ar[i-2] == br[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(br)]
}
