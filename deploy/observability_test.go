package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// familyNames lists every metric family internal/metrics registers, read
// from its source (so a family added anywhere in the package is required
// on the dashboard without this test knowing it).
func familyNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "internal", "metrics", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	res := []*regexp.Regexp{
		regexp.MustCompile(`(?:counterVec|gaugeVec|gauge|counter|histogramVec|histogram)\(\s*"([a-z_]+)"`),
		regexp.MustCompile(`Name:\s*"([a-z_]+)"`),
		regexp.MustCompile(`Namespace\s*\+\s*"_([a-z_]+)"`),
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range res {
			for _, m := range re.FindAllStringSubmatch(string(data), -1) {
				out = append(out, "mcpgw_"+m[1])
			}
		}
		// Families named through a table (ops.go's kindFamilies).
		for _, m := range regexp.MustCompile(`\{"([a-z_]+_total)", "([a-z_]+_seconds)"`).FindAllStringSubmatch(string(data), -1) {
			out = append(out, "mcpgw_"+m[1], "mcpgw_"+m[2])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Every metric family mcpgw exports has a panel on the Grafana dashboard.
func TestDashboardShowsEveryFamily(t *testing.T) {
	families := familyNames(t)
	if len(families) < 30 {
		t.Fatalf("found only %d metric families in internal/metrics: %v", len(families), families)
	}
	data, err := os.ReadFile(filepath.Join("grafana", "mcpgw-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	name := regexp.MustCompile(`\bmcpgw_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				for _, s := range []string{"_bucket", "_count", "_sum"} {
					n = strings.TrimSuffix(n, s)
				}
				used[n] = true
			}
		}
	}
	for _, f := range families {
		if !used[f] {
			t.Errorf("no dashboard panel queries %s; add one to deploy/grafana/mcpgw-dashboard.json", f)
		}
	}
}

// Every alert rule has a promtool unit test that expects it to fire
// (check-deploy.sh runs them).
func TestEveryAlertIsTested(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	for file, into := range map[string]any{"alerts.yaml": &rules, "alerts_test.yaml": &tests} {
		data, err := os.ReadFile(filepath.Join("prometheus", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] {
				t.Errorf("alert %s has no test in prometheus/alerts_test.yaml that expects it to fire", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alert rules found")
	}
}
