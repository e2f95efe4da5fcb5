package strictyaml

import (
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type inner struct {
	Port int `yaml:"port"`
}

type doc struct {
	Name  string            `yaml:"name"`
	Inner *inner            `yaml:"inner"`
	Tags  []string          `yaml:"tags"`
	Env   map[string]string `yaml:"env"`
}

// TestDecodeReportsEveryProblem: one pass reports every unknown key (with a
// suggestion), type error and missing variable, each with its line and
// path, and still decodes the rest.
func TestDecodeReportsEveryProblem(t *testing.T) {
	src := `name: ${NAME}
inner:
  port: eighty
  prot: 1
tags: [a, "${MISSING}"]
env: {A: "$${LITERAL}"}
`
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		if k == "NAME" {
			return "gw", true
		}
		return "", false
	}
	d := New(env)
	var out doc
	d.Decode(n.Content[0], reflect.ValueOf(&out).Elem(), "") // the document's root mapping, as config.Parse passes it
	if out.Name != "gw" || out.Env["A"] != "${LITERAL}" || len(out.Tags) != 2 || out.Tags[0] != "a" {
		t.Errorf("decoded %+v", out)
	}
	if !d.Set("name") || d.Set("nothing") {
		t.Errorf("Set: name %v, nothing %v", d.Set("name"), d.Set("nothing"))
	}
	if l, ok := d.Line("inner.port"); !ok || l != 3 {
		t.Errorf("Line(inner.port) = %d, %v; want 3", l, ok)
	}
	got := d.Problems().Error()
	for _, want := range []string{
		"line 3: inner.port", // type error
		"line 4: inner.prot", // unknown key
		"port",               // the suggestion
		"line 5: tags[1]",    // unset variable
		"MISSING",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if len(d.Problems()) != 3 {
		t.Errorf("%d problems, want 3:\n%s", len(d.Problems()), got)
	}
}

func TestClosest(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"headres", "headers"}, {"timeout", "timeout"}, {"zzzzzz", ""},
	} {
		if got := Closest(tt.in, []string{"headers", "timeout", "url"}); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
