package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
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

// Every manifest under deploy/kubernetes decodes strictly into its
// Kubernetes API type, the Kustomization lists every manifest of its
// directory and nothing else, and each set of objects applied together
// fits (see bundle.check): the config in each ConfigMap loads with the
// real loader and the container's environment. Other YAML under deploy/
// parses.
func TestManifests(t *testing.T) {
	dec := strictDecoder(t)
	files := yamlFiles(t, ".", func(p string) bool { return p == filepath.Join("helm", "mcpgw", "templates") })
	if len(files) < 8 {
		t.Fatalf("found only %d YAML files under deploy/", len(files))
	}
	bundles := map[string]*bundle{}
	var kusts []kustomization
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs(t, data)) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
		if !strings.HasPrefix(f, "kubernetes") {
			continue
		}
		objs, ks := decodeManifests(t, dec, f, data)
		kusts = append(kusts, ks...)
		dir := filepath.Dir(f)
		if bundles[dir] == nil {
			bundles[dir] = &bundle{t: t}
		}
		bundles[dir].objs = append(bundles[dir].objs, objs...)
	}
	if len(kusts) != 1 {
		t.Fatalf("want one Kustomization under deploy/kubernetes, found %d", len(kusts))
	}
	var listed, present []string
	listed = append(listed, kusts[0].Resources...)
	for _, f := range files {
		if filepath.Dir(f) == "kubernetes" && filepath.Base(f) != "kustomization.yaml" {
			present = append(present, filepath.Base(f))
		}
	}
	slices.Sort(listed)
	slices.Sort(present)
	if !slices.Equal(listed, present) {
		t.Errorf("kustomization.yaml lists %v, the directory has %v", listed, present)
	}
	want := map[string][]string{
		"kubernetes":         {"ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Service"},
		"kubernetes/sidecar": {"ConfigMap", "Deployment"},
	}
	for dir, kinds := range want {
		b := bundles[filepath.FromSlash(dir)]
		if b == nil {
			t.Errorf("no manifests in deploy/%s", dir)
			continue
		}
		if got := b.kinds(); !slices.Equal(got, kinds) {
			t.Errorf("deploy/%s has kinds %v, want %v", dir, got, kinds)
		}
		if n := len(b.check()); n != 1 {
			t.Errorf("deploy/%s: loaded %d mcpgw configs, want 1", dir, n)
		}
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
	m.InterceptDecision("i", "result", "allow")
	m.InterceptLatency("i", "result", time.Millisecond)
	m.InterceptFailure("i", "request")
	m.SetCuratedNames("/mcp", map[string]string{"say": "demo__echo"})
	u := m.Upstream("x")
	u.CallDone("tools/call", u.CallStarted(), metrics.ReasonTimeout)
	u.Unattributed("sampling/createMessage")
	u.InteractiveConns(1, 1)
	u.SandboxEvent("started")
	u.SandboxEgress("allowed")
	u.SandboxEgressBytes(1, 1)
	u.SandboxEgressOpen(0)
	m.SetRouteSource(func() []metrics.RouteStats { return []metrics.RouteStats{{Route: "/mcp"}} })
	m.SetUpstreamConnSource(func() (int64, int64) { return 0, 0 })
	r := m.NewRedis() // registered only with sessions.redis
	r.RedisDropped(metrics.RedisDroppedQueueFull, 1)
	r.RedisError(metrics.RedisOpAppend)
	m.TokenExchange("u", metrics.ExchangeOK)
	m.ExchangeCache("u", 1, 1)
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
