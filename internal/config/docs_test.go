package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
	"gopkg.in/yaml.v3"
)

// The configuration reference, docs/configuration.md, must document every
// key. The rule (stated at the top of that file):
//
//   - Every struct in the config has a section: a Markdown heading that
//     contains its path in backticks, e.g. ### `upstreams.<name>`. Map
//     values are written .<name>, list items [] (`auth.issuers[]`); a
//     heading may name several paths sharing one type. The top level's
//     section is the heading "Top level".
//   - Inside that section (up to the next heading of the same or a higher
//     level), each key of the struct has a table row starting | `key` |.
//
// Types with their own UnmarshalYAML (Duration, Rate) are values, not
// sections.

const docPath = "../../docs/configuration.md"

// docKey is a key that must be documented in a section.
type docKey struct {
	section, key string
}

// configKeys walks typ by reflection and returns every key with the section
// path it belongs to, in declaration order.
func configKeys(typ reflect.Type, path string, seen map[string]bool, out *[]docKey) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.Slice, reflect.Array:
		configKeys(typ.Elem(), path+"[]", seen, out)
		return
	case reflect.Map:
		configKeys(typ.Elem(), path+".<name>", seen, out)
		return
	case reflect.Struct:
	default:
		return
	}
	if reflect.PointerTo(typ).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return // a value with its own syntax (Duration, Rate)
	}
	if seen[path] {
		return
	}
	seen[path] = true
	index, names := strictyaml.Fields(typ)
	for _, name := range names {
		*out = append(*out, docKey{section: path, key: name})
		child := name
		if path != "" {
			child = path + "." + name
		}
		configKeys(typ.Field(index[name]).Type, child, seen, out)
	}
}

// allConfigKeys lists every documented-to-be key of Config.
func allConfigKeys() []docKey {
	var out []docKey
	configKeys(reflect.TypeFor[Config](), "", map[string]bool{}, &out)
	return out
}

var (
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*)$`)
	backtickRE = regexp.MustCompile("`([^`]+)`")
	keyRowRE   = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")
)

// docSections parses the reference into section path -> documented keys.
func docSections(doc string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	type open struct {
		level int
		paths []string
	}
	var stack []open
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			level := len(m[1])
			for len(stack) > 0 && stack[len(stack)-1].level >= level {
				stack = stack[:len(stack)-1]
			}
			var paths []string
			if strings.EqualFold(strings.TrimSpace(m[2]), "Top level") {
				paths = []string{""}
			}
			for _, b := range backtickRE.FindAllStringSubmatch(m[2], -1) {
				paths = append(paths, b[1])
			}
			stack = append(stack, open{level: level, paths: paths})
			continue
		}
		m := keyRowRE.FindStringSubmatch(line)
		if m == nil || len(stack) == 0 {
			continue
		}
		for _, p := range stack[len(stack)-1].paths {
			if out[p] == nil {
				out[p] = map[string]bool{}
			}
			out[p][m[1]] = true
		}
	}
	return out
}

func TestConfigReferenceDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	sections := docSections(string(data))
	keys := allConfigKeys()
	if len(keys) < 50 {
		t.Fatalf("found only %d config keys by reflection; the walker is broken", len(keys))
	}
	want := map[string]map[string]bool{}
	for _, k := range keys {
		if want[k.section] == nil {
			want[k.section] = map[string]bool{}
		}
		want[k.section][k.key] = true
		if sections[k.section] == nil {
			name := "`" + k.section + "`"
			if k.section == "" {
				name = `"Top level"`
			}
			t.Errorf("docs/configuration.md has no section for %s (a heading containing %s); key %q is undocumented", k.section, name, k.key)
			continue
		}
		if !sections[k.section][k.key] {
			t.Errorf("docs/configuration.md: key %q of section %q is undocumented; add a row | `%s` | type | default | meaning | to that section", k.key, k.section, k.key)
		}
	}
	// The reverse: a documented key that no longer exists is stale.
	for sec, documented := range sections {
		if want[sec] == nil {
			continue // a heading that merely mentions something in backticks
		}
		for k := range documented {
			if !want[sec][k] {
				t.Errorf("docs/configuration.md documents %q in section %q, but the config has no such key", k, sec)
			}
		}
	}
}

// The walker itself: spot-check a few paths so that a refactor of it
// cannot silently check nothing.
func TestConfigKeysWalker(t *testing.T) {
	keys := allConfigKeys()
	for _, k := range []docKey{
		{"", "listen"},
		{"upstreams.<name>", "headers"},
		{"upstreams.<name>.roots[]", "uri"},
		{"auth.oidc", "groups_claim"},
		{"auth.issuers[]", "issuer"},
		{"auth.api_keys[]", "key_file"},
		{"sessions.redis", "addr"},
		{"policy.rules[].match", "client_ids"},
		{"policy.rate_limits.upstreams.<name>", "max_concurrent"},
		{"policy.rate_limits.tools[]", "per_principal"},
	} {
		if !slices.Contains(keys, k) {
			t.Errorf("walker missed %+v", k)
		}
	}
	for _, k := range keys {
		if k.section == "policy.rate_limits.principal.rate" || k.key == "N" || k.key == "n" {
			t.Errorf("walker descended into a value type: %+v", k)
		}
	}
}

var yamlFence = regexp.MustCompile("(?ms)^```ya?ml\n(.*?)^```")

// Every ```yaml block in README.md and docs/*.md that is a whole config (a
// top-level upstreams: key) parses, so the examples stay valid.
func TestDocExamplesParse(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	env := func(name string) (string, bool) { return "placeholder-" + strings.ToLower(name), true }
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlFence.FindAllSubmatch(data, -1) {
			var top map[string]any
			if yaml.Unmarshal(m[1], &top) != nil || top["upstreams"] == nil {
				continue // a fragment, not a whole config
			}
			n++
			name := fmt.Sprintf("%s (yaml block %d)", filepath.Base(f), i+1)
			if _, err := Parse(name, m[1], env); err != nil {
				t.Errorf("%s does not parse:\n%v", name, err)
			}
		}
	}
	if n < 3 {
		t.Errorf("found only %d config examples in README.md and docs/*.md", n)
	}
}
