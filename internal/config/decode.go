package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// maxValues bounds how many YAML values one decode visits, so a small file
// that multiplies itself through aliases ("billion laughs") cannot stall a
// config reload.
const maxValues = 100_000

// decoder walks a yaml.Node tree against Go types by reflection, following
// the yaml struct tags. Doing the walk ourselves (rather than yaml.v3's
// Decode with KnownFields) lets it report every unknown key and type error
// with its line and path, expand ${VAR} only in scalar values, and keep going
// after a mistake.
type decoder struct {
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

func newDecoder(env func(string) (string, bool)) *decoder {
	return &decoder{
		env:    env,
		lines:  map[string]int{},
		set:    map[string]bool{},
		active: map[*yaml.Node]bool{},
		budget: maxValues,
	}
}

func (d *decoder) add(line int, path, msg string) {
	d.problems = append(d.problems, Problem{Line: line, Path: path, Msg: msg})
}

// fail records a problem for a value that could not be decoded.
func (d *decoder) fail(line int, path, msg string) {
	d.add(line, path, msg)
	d.failed = append(d.failed, path)
}

// spend takes one unit of the value budget and reports whether any is left.
func (d *decoder) spend(n *yaml.Node) bool {
	d.budget--
	if d.budget == -1 {
		// Failing the root keeps validation from reporting the values that
		// were never decoded.
		d.fail(n.Line, "", fmt.Sprintf("the document expands to more than %d values (through aliases and merges?); write it out plainly", maxValues))
	}
	return d.budget >= 0
}

// decode stores node n into v, which must be settable.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
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

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, v.Type(), path)
		return
	}
	index, names := yamlFields(v.Type())
	for _, p := range d.pairs(n, path) {
		kp := joinPath(path, p.name)
		i, ok := index[p.name]
		if !ok {
			d.add(p.key.Line, kp, unknownKey(p.name, names))
			continue
		}
		d.lines[kp] = p.key.Line
		d.decode(p.val, v.Field(i), kp)
	}
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, v.Type(), path)
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, p := range d.pairs(n, path) {
		kp := joinPath(path, p.name)
		d.lines[kp] = p.key.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(p.val, elem, kp)
		v.SetMapIndex(reflect.ValueOf(p.name).Convert(v.Type().Key()), elem)
	}
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
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

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
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
func (d *decoder) unmarshaler(n *yaml.Node, u yaml.Unmarshaler, path string) {
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
func (d *decoder) expand(n *yaml.Node, path string) (string, bool) {
	s, errs := expandVars(n.Value, d.env)
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
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
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
			d.add(k.Line, joinPath(path, k.Value), fmt.Sprintf("key %q is set twice (first on line %d); keep one", k.Value, first))
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
func (d *decoder) mergeSources(m *yaml.Node, path string) []*yaml.Node {
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
func (d *decoder) typeError(n *yaml.Node, typ reflect.Type, path string) {
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
	d.fail(n.Line, path, fmt.Sprintf("want %s, got %s; %s", want, describe(n), fix))
}

// describe names what a node holds, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
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

// yamlFields maps a struct type's YAML keys to field indexes, and lists the
// keys in declaration order for messages.
func yamlFields(t reflect.Type) (map[string]int, []string) {
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
	if s := closest(name, known); s != "" {
		return fmt.Sprintf("unknown key %q; did you mean %q?", name, s)
	}
	return fmt.Sprintf("unknown key %q; remove it or use one of: %s", name, strings.Join(known, ", "))
}

// joinPath appends a key to a path, quoting keys that are not plain words
// so that paths stay unambiguous (upstreams["a.b"].url).
func joinPath(path, key string) string {
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

// parentPath strips the last element of a path made by joinPath or an index.
func parentPath(p string) string {
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

// UnmarshalYAML accepts a Go duration string such as "30s" or "1m30s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration, got %s; write one value such as 30s or 1m30s", describe(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("%q is not a duration; write a number with a unit (ms, s, m, h), e.g. 30s or 1m30s", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration back in the form UnmarshalYAML reads.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String formats the duration like time.Duration ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }
