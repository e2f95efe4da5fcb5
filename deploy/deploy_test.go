package deploy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// env is what ${VAR} expands to in the example configs.
func env(name string) (string, bool) {
	switch name {
	case "MCPGW_EXECUTABLE":
		return "/usr/local/bin/mcpgw", true
	case "GITHUB_TOKEN", "CI_KEY", "MCPGW_API_KEY":
		return "test-secret", true
	}
	return "", false
}

// docs decodes every YAML document of a file.
func docs(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []map[string]any
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("YAML: %v", err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
}

func yamlFiles(t *testing.T, root string, skip func(string) bool) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skip != nil && skip(p) {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

// loadConfigMaps loads the config.yaml of every ConfigMap in docs with the
// real config loader and returns how many it found.
func loadConfigMaps(t *testing.T, file string, ds []map[string]any) int {
	t.Helper()
	n := 0
	for _, d := range ds {
		if d["kind"] != "ConfigMap" {
			continue
		}
		data, _ := d["data"].(map[string]any)
		for key, v := range data {
			if !strings.HasSuffix(key, ".yaml") {
				continue
			}
			n++
			if _, err := config.Parse(file+" ConfigMap "+key, []byte(v.(string)), env); err != nil {
				t.Errorf("%s: ConfigMap data %s does not load:\n%v", file, key, err)
			}
		}
	}
	return n
}

// Every manifest parses and names its kind; every ConfigMap's mcpgw config
// loads with the real loader.
func TestManifests(t *testing.T) {
	files := yamlFiles(t, ".", func(p string) bool { return p == filepath.Join("helm", "mcpgw", "templates") })
	if len(files) < 8 {
		t.Fatalf("found only %d YAML files under deploy/", len(files))
	}
	configMaps := 0
	kinds := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ds := docs(t, data)
		if len(ds) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
		if strings.HasPrefix(f, "kubernetes") {
			for _, d := range ds {
				if d["apiVersion"] == nil || d["kind"] == nil {
					t.Errorf("%s: a document without apiVersion or kind", f)
				}
				kinds[fmt.Sprint(d["kind"])] = true
			}
		}
		configMaps += loadConfigMaps(t, f, ds)
	}
	for _, k := range []string{"Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget", "Kustomization"} {
		if !kinds[k] {
			t.Errorf("no %s under deploy/kubernetes", k)
		}
	}
	if configMaps < 2 {
		t.Errorf("loaded %d ConfigMap configs, want the shared-service and sidecar ones", configMaps)
	}
}

var fence = regexp.MustCompile("(?ms)^```ya?ml\n(.*?)^```")

// Every config under docs/ loads: *.yaml files, and ```yaml blocks in the
// Markdown that are whole configs (a top-level upstreams: key).
func TestDocsConfigsLoad(t *testing.T) {
	n := 0
	for _, f := range yamlFiles(t, filepath.Join("..", "docs"), nil) {
		n++
		if _, err := config.Load(f, env); err != nil {
			t.Errorf("%s does not load:\n%v", f, err)
		}
	}
	mds, _ := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	more, _ := filepath.Glob(filepath.Join("..", "docs", "*", "*.md"))
	for _, f := range append(mds, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range fence.FindAllSubmatch(data, -1) {
			var top map[string]any
			if yaml.Unmarshal(m[1], &top) != nil || top["upstreams"] == nil {
				continue // a fragment, not a config
			}
			n++
			if _, err := config.Parse(fmt.Sprintf("%s (yaml block %d)", f, i+1), m[1], env); err != nil {
				t.Errorf("%s: yaml block %d does not load:\n%v", f, i+1, err)
			}
		}
	}
	if n == 0 {
		t.Error("no config found under docs/")
	}
}

// renderChart renders the Helm chart with Go templates and the few Helm
// functions it uses (helm itself is not installable here); values are
// values.yaml merged with overrides.
func renderChart(t *testing.T, overrides map[string]any) map[string][]map[string]any {
	t.Helper()
	dir := filepath.Join("helm", "mcpgw")
	var values, chart map[string]any
	for file, into := range map[string]*map[string]any{"values.yaml": &values, "Chart.yaml": &chart} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	for k, v := range overrides {
		values[k] = v
	}
	var tpl *template.Template
	toYaml := func(v any) (string, error) {
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(v); err != nil {
			return "", err
		}
		return strings.TrimSuffix(b.String(), "\n"), nil
	}
	indent := func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	}
	funcs := template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := tpl.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"toYaml":  toYaml,
		"indent":  indent,
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"quote":   func(v any) string { return fmt.Sprintf("%q", fmt.Sprint(v)) },
		"default": func(d, v any) any {
			if v == nil || reflect.ValueOf(v).IsZero() {
				return d
			}
			return v
		},
		"sha256sum": func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
	}
	tpl = template.New("chart").Funcs(funcs).Option("missingkey=error")
	files, _ := filepath.Glob(filepath.Join(dir, "templates", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tpl.New(filepath.Base(f)).Parse(string(data)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	top := map[string]any{
		"Values":  values,
		"Chart":   map[string]any{"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
		"Release": map[string]any{"Name": "test", "Namespace": "default", "Service": "Helm"},
	}
	out := map[string][]map[string]any{}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "_") || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		var b bytes.Buffer
		if err := tpl.ExecuteTemplate(&b, name, top); err != nil {
			t.Fatalf("render %s: %v", name, err)
		}
		out[name] = docs(t, b.Bytes())
	}
	return out
}

func TestHelmChartRenders(t *testing.T) {
	rendered := renderChart(t, nil)
	kinds := []string{}
	configMaps := 0
	for name, ds := range rendered {
		for _, d := range ds {
			kinds = append(kinds, fmt.Sprint(d["kind"]))
			if d["apiVersion"] == nil {
				t.Errorf("%s: no apiVersion", name)
			}
		}
		configMaps += loadConfigMaps(t, "helm "+name, ds)
	}
	slices.Sort(kinds)
	if want := []string{"ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Service"}; !slices.Equal(kinds, want) {
		t.Errorf("rendered kinds %v, want %v", kinds, want)
	}
	if configMaps != 1 {
		t.Errorf("ConfigMap configs loaded: %d", configMaps)
	}
	dep := rendered["deployment.yaml"][0]
	b, _ := json.Marshal(dep)
	for _, want := range []string{`"--shutdown-delay=5s"`, `"--drain-timeout=30s"`, `"path":"/readyz"`, `"path":"/healthz"`, `"image":"ghcr.io/mcpgw/mcpgw:0.1.0"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("deployment lacks %s", want)
		}
	}

	// With an existing Secret the chart makes none.
	rendered = renderChart(t, map[string]any{"existingSecret": "mine"})
	if len(rendered["secret.yaml"]) != 0 {
		t.Error("a Secret was rendered although existingSecret is set")
	}
	if b, _ := json.Marshal(rendered["deployment.yaml"]); !strings.Contains(string(b), `"secretName":"mine"`) {
		t.Error("the deployment does not mount existingSecret")
	}
}

// The dashboard and the alert rules only use metrics mcpgw exports.
func TestDashboardAndAlertsUseRealMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{})
	m.Request("/mcp", "tools/call", nil) // materialize the lazily created series
	m.RequestDone("/mcp", "tools/call", metrics.OutcomeOK, time.Millisecond)
	for _, k := range []mcp.Kind{mcp.KindTool, mcp.KindPrompt, mcp.KindResource} {
		m.Target("/mcp", k, "x", metrics.OutcomeOK, time.Millisecond)
	}
	m.AuthFailure("unavailable")
	m.PolicyDecision("/mcp", "deny")
	m.RateLimited("/mcp")
	u := m.Upstream("x")
	u.CallDone("tools/call", u.CallStarted(), metrics.ReasonTimeout)
	m.SetRouteSource(func() []metrics.RouteStats { return []metrics.RouteStats{{Route: "/mcp"}} })
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
	}
	name := regexp.MustCompile(`\b((?:mcpgw|go|process)_[a-z_]+)`)
	for _, f := range []string{"grafana/mcpgw-dashboard.json", "prometheus/alerts.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".json") {
			var v map[string]any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		for _, match := range name.FindAllStringSubmatch(string(data), -1) {
			n := match[1]
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
			if !exported[n] && !exported[base] {
				t.Errorf("%s uses %s, which mcpgw does not export", f, n)
			}
		}
	}
}
