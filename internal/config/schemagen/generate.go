package main

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcpgw/mcpgw/internal/config"
)

// envPattern matches a string holding a ${VAR} reference. The loader
// expands references in every scalar before reading it, so a boolean or a
// number may be written as "${VAR}".
const envPattern = `\$\{`

// durationRE is what time.ParseDuration accepts.
const durationRE = `[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)`

// customs are the config types that read a scalar with their own
// UnmarshalYAML: each is a definition of its own. A new such type must be
// added here (generate fails until it is).
var customs = map[reflect.Type]func() *schema{
	reflect.TypeFor[config.CurateValue](): func() *schema {
		return &schema{Description: "Any value, sent as JSON; a string may name the caller's principal: ${principal.subject}, ${principal.claims.NAME}."}
	},
	reflect.TypeFor[config.Duration](): func() *schema {
		return &schema{
			Description: "A duration: a number with a unit (ns, us, ms, s, m, h), e.g. 30s or 1m30s.",
			Type:        typeList{"string"},
			Pattern:     `^` + durationRE + `$|` + envPattern,
		}
	},
	reflect.TypeFor[config.Rate](): func() *schema {
		return &schema{
			Description: "An event rate: a count per unit (s, m, h) or per duration, e.g. 10/s, 600/m, 1000/h or 5/10s.",
			Type:        typeList{"string"},
			Pattern:     `^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\s*/\s*(s|sec|second|m|min|minute|h|hour|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)\s*$|` + envPattern,
		}
	},
}

// gen builds the schema of config.Config by reflection.
type gen struct {
	docs map[string]typeDoc
	// ref is docs/configuration.md's rows, by section path and key.
	ref  map[string]map[string]mdRow
	defs *members
	// used records the rules, required and exactlyOne entries applied.
	used map[string]bool
}

func generate(docs map[string]typeDoc, ref map[string]map[string]mdRow) (*schema, error) {
	g := &gen{docs: docs, ref: ref, defs: &members{}, used: map[string]bool{}}
	root, err := g.object(reflect.TypeFor[config.Config](), "")
	if err != nil {
		return nil, err
	}
	var unused []string
	for _, k := range slices.Concat(slices.Collect(maps.Keys(rules)), slices.Collect(maps.Keys(required)), slices.Collect(maps.Keys(exactlyOne))) {
		if !g.used[k] {
			unused = append(unused, k)
		}
	}
	if len(unused) > 0 {
		slices.Sort(unused)
		return nil, fmt.Errorf("rules.go names types or keys that config.Config does not have: %s; fix or remove them", strings.Join(unused, ", "))
	}
	root.Schema = draft
	root.ID = schemaID
	root.Title = "mcpgw configuration"
	root.Description = "The configuration file of mcpgw, the Model Context Protocol gateway (docs/configuration.md describes every key). Check a file with: mcpgw validate -c FILE."
	root.Definitions = g.defs
	return root, nil
}

// yamlKey is the key the loader reads a field from ("" for none), as
// config's decoder does: the yaml tag's name, or the lower-cased field name.
func yamlKey(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return strings.ToLower(f.Name)
	}
	return name
}

// child is the docs/configuration.md path of key under path.
func child(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object is the schema of a struct at path: its keys and nothing else.
func (g *gen) object(t reflect.Type, path string) (*schema, error) {
	name := t.Name()
	keys := map[string]string{}
	for i := range t.NumField() {
		if k := yamlKey(t.Field(i)); k != "" {
			keys[t.Field(i).Name] = k
		}
	}
	s := &schema{
		Description:          describe(g.docs[name].doc, keys, true),
		Type:                 typeList{"object"},
		Properties:           &members{},
		AdditionalProperties: false,
	}
	for i := range t.NumField() {
		f := t.Field(i)
		key := keys[f.Name]
		if key == "" {
			continue
		}
		id := name + "." + key
		r, ok := rules[id]
		if ok {
			g.used[id] = true
		}
		v, err := g.value(f.Type, r, id, child(path, key))
		if err != nil {
			return nil, err
		}
		row := g.ref[path][key]
		desc := describe(g.docs[name].fields[f.Name], keys, false)
		if desc == "" {
			desc = row.meaning
		}
		if desc == "" {
			desc = g.typeDesc(f.Type)
		}
		switch {
		case row.def == "", row.def == "none", strings.HasPrefix(row.def, "required"):
		default:
			if !strings.Contains(strings.ToLower(desc), "default") {
				desc += " Default: " + strings.TrimSuffix(row.def, ".") + "."
			}
		}
		s.Properties.set(key, nullable(v, desc))
	}
	has := func(k string) bool { return s.Properties.get(k) != nil }
	if req, ok := required[name]; ok {
		g.used[name] = true
		for _, k := range req {
			if !has(k) {
				return nil, fmt.Errorf("rules.go: required[%q] names %q, which %s does not have", name, k, name)
			}
		}
		s.Required = req
	}
	if one, ok := exactlyOne[name]; ok {
		g.used[name] = true
		for _, k := range one {
			if !has(k) {
				return nil, fmt.Errorf("rules.go: exactlyOne[%q] names %q, which %s does not have", name, k, name)
			}
			s.OneOf = append(s.OneOf, &schema{Required: []string{k}})
		}
	}
	return s, nil
}

// typeDesc is the doc comment of the named type under t, for a field
// without a comment of its own.
func (g *gen) typeDesc(t reflect.Type) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.PkgPath() != reflect.TypeFor[config.Config]().PkgPath() {
		return ""
	}
	return describe(g.docs[t.Name()].doc, nil, false)
}

// nullable lets a struct field be empty ("key:" or "key: ~"), which the
// loader reads as absent.
func nullable(v *schema, desc string) *schema {
	switch {
	case v.Ref != "":
		return &schema{Description: desc, AnyOf: []*schema{v, {Type: typeList{"null"}}}}
	case v.AnyOf != nil:
		v.AnyOf = append(v.AnyOf, &schema{Type: typeList{"null"}})
	default:
		v.Type = append(v.Type, "null")
	}
	v.Description = desc
	return v
}

// value is the schema of a value of type t at path, with r applied.
func (g *gen) value(t reflect.Type, r rule, id, path string) (*schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		mk, ok := customs[t]
		if !ok {
			return nil, fmt.Errorf("%s: %s reads YAML with its own UnmarshalYAML; describe its syntax in customs in generate.go", id, t)
		}
		if g.defs.get(t.Name()) == nil {
			g.defs.set(t.Name(), mk())
		}
		return &schema{Ref: "#/definitions/" + t.Name()}, nil
	}
	switch t.Kind() {
	case reflect.String:
		if len(r.enum) > 0 {
			return enum(r), nil
		}
		// The loader takes a scalar's text, so port: 8080 is the string "8080".
		return &schema{Type: typeList{"string", "number", "boolean"}}, nil
	case reflect.Bool:
		return &schema{Type: typeList{"boolean", "string"}, Pattern: envPattern}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &schema{Type: typeList{"integer", "string"}, Pattern: envPattern, Minimum: r.minimum}, nil
	case reflect.Float32, reflect.Float64:
		return &schema{Type: typeList{"number", "string"}, Pattern: envPattern, Minimum: r.minimum}, nil
	case reflect.Slice:
		items, err := g.value(t.Elem(), rule{enum: r.enum}, id+"[]", path+"[]")
		if err != nil {
			return nil, err
		}
		return &schema{Type: typeList{"array"}, Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings, not %s", id, t.Key())
		}
		vals, err := g.value(t.Elem(), rule{}, id+".<name>", path+".<name>")
		if err != nil {
			return nil, err
		}
		s := &schema{Type: typeList{"object"}, AdditionalProperties: vals}
		if r.keyPattern != "" {
			s.PropertyNames = &schema{Pattern: r.keyPattern}
		}
		return s, nil
	case reflect.Struct:
		if g.defs.get(t.Name()) == nil {
			g.defs.set(t.Name(), &schema{}) // reserved: keeps first-use order
			s, err := g.object(t, path)
			if err != nil {
				return nil, err
			}
			g.defs.set(t.Name(), s)
		}
		return &schema{Ref: "#/definitions/" + t.Name()}, nil
	}
	return nil, fmt.Errorf("%s: no schema for a %s; teach value in generate.go", id, t)
}

// enum accepts the rule's values, a ${VAR} reference, and strings matching
// orPattern. A value that YAML reads as a number or boolean when unquoted
// (protocol: 2026) is accepted in that form too, as the loader does.
func enum(r rule) *schema {
	var vals []any
	for _, e := range r.enum {
		vals = append(vals, e)
		var typed any
		if yaml.Unmarshal([]byte(e), &typed) == nil {
			if _, isString := typed.(string); !isString && typed != nil {
				vals = append(vals, typed)
			}
		}
	}
	s := &schema{AnyOf: []*schema{{Enum: vals}}}
	if r.orPattern != "" {
		s.AnyOf = append(s.AnyOf, &schema{Type: typeList{"string"}, Pattern: r.orPattern})
	}
	s.AnyOf = append(s.AnyOf, &schema{Type: typeList{"string"}, Pattern: envPattern})
	return s
}
