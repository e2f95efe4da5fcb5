package config_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
)

func TestPolicyEveryField(t *testing.T) {
	c, err := loadAll("testdata/policy-full.good.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Policy{
		Default: "deny",
		Rules: []*config.PolicyRule{{
			Match: &config.PolicyMatch{
				Subjects: []string{"alice"}, Groups: []string{"eng"}, Scopes: []string{"mcp:tools"},
				ClientIDs: []string{"console"}, APIKeys: []string{"ci"}, Routes: []string{"/mcp", "/mcp/fs"},
			},
			When:  `"admin" in principal.groups || arguments.repo.startsWith("acme/")`,
			Allow: []string{"github__*", "tool:fs__read_*", "prompt:*", "resource:fs+file:///pub/*"},
			Deny:  []string{"github__delete_*"},
		}},
		ToolScopes: map[string][]string{"github__*": {"repo:read"}, "github__create_*": {"repo:write", "issues:write"}},
		RateLimits: &config.RateLimits{
			Principal: &config.RateLimit{Rate: config.Rate{N: 10, Per: time.Second}, Burst: 10},
			Tools: []*config.ToolRateLimit{
				{Tool: "github__create_*", Rate: config.Rate{N: 600, Per: time.Minute}, Burst: 5, PerPrincipal: true},
				{Tool: "*", Rate: config.Rate{N: 2.5, Per: 10 * time.Second}, Burst: 3},
			},
			Upstreams: map[string]*config.UpstreamLimit{
				"github": {Rate: config.Rate{N: 50, Per: time.Second}, Burst: 100, MaxConcurrent: 8},
				"fs":     {MaxConcurrent: 4},
			},
			IdleTimeout: config.Duration(30 * time.Minute),
			MaxBuckets:  5000,
		},
		Pinning: &config.Pinning{Mode: "enforce", LockFile: "/etc/mcpgw/tools.lock.json"},
	}
	if !reflect.DeepEqual(c.Policy, want) {
		t.Errorf("policy:\n got %+v\nwant %+v", c.Policy, want)
		if !reflect.DeepEqual(c.Policy.RateLimits, want.RateLimits) {
			t.Errorf("rate_limits:\n got %+v\nwant %+v", c.Policy.RateLimits, want.RateLimits)
		}
	}
}

func TestPolicyDefaultDependsOnAuth(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"no auth, no policy", "", "allow"},
		{"auth, no policy", "auth: {api_keys: [{name: k, key: s}]}\n", "deny"},
		{"auth, policy without default", "auth: {api_keys: [{name: k, key: s}]}\npolicy: {rules: [{allow: ['*']}]}\n", "deny"},
		{"auth, explicit allow", "auth: {api_keys: [{name: k, key: s}]}\npolicy: {default: allow}\n", "allow"},
		{"insecure_no_auth is not auth", "auth: {insecure_no_auth: true}\n", "allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, "upstreams: {fs: {command: [x]}}\n"+tc.src, nil)
			if c.Policy.Default != tc.want {
				t.Errorf("default = %q, want %q", c.Policy.Default, tc.want)
			}
		})
	}
	// Without auth, a policy section must say which.
	ps := parseProblems(t, "upstreams: {fs: {command: [x]}}\npolicy: {rules: [{allow: ['*']}]}\n", nil)
	if len(ps) != 1 || ps[0].Path != "policy.default" {
		t.Errorf("got %v", ps)
	}
}

func TestRateYAML(t *testing.T) {
	for in, want := range map[string]config.Rate{
		"10/s":    {N: 10, Per: time.Second},
		"600/m":   {N: 600, Per: time.Minute},
		"1000/h":  {N: 1000, Per: time.Hour},
		"5/10s":   {N: 5, Per: 10 * time.Second},
		"0.5/sec": {N: 0.5, Per: time.Second},
	} {
		c := mustParse(t, "upstreams: {fs: {command: [x]}}\npolicy: {default: allow, rate_limits: {principal: {rate: '"+in+"'}}}", nil)
		got := c.Policy.RateLimits.Principal.Rate
		if got != want {
			t.Errorf("%s: got %+v, want %+v", in, got, want)
		}
		back := mustParse(t, "upstreams: {fs: {command: [x]}}\npolicy: {default: allow, rate_limits: {principal: {rate: '"+got.String()+"'}}}", nil)
		if back.Policy.RateLimits.Principal.Rate != want {
			t.Errorf("%s: String() %q does not read back", in, got.String())
		}
	}
	r := config.Rate{N: 600, Per: time.Minute}
	if r.PerSecond() != 10 || r.String() != "600/m" || config.DefaultBurst(config.Rate{N: 0.5, Per: time.Second}) != 1 {
		t.Errorf("Rate helpers: %v %v", r.PerSecond(), r)
	}
	if v, err := r.MarshalYAML(); err != nil || v != "600/m" {
		t.Errorf("MarshalYAML = %v, %v", v, err)
	}
}
