package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/mcpgw/mcpgw/internal/config"
)

const repo = "../../.."

// compile compiles a schema file with an independent draft-07 validator,
// which also checks the schema against the draft-07 meta-schema.
func compile(t *testing.T, rel string) *jsonschema.Schema {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, rel))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(rel, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(rel)
	if err != nil {
		t.Fatalf("%s does not compile: %v", rel, err)
	}
	return s
}

// instance turns a YAML document into a JSON Schema instance, as an
// editor's YAML language server sees it.
func instance(t *testing.T, y []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(y, &v); err != nil {
		t.Fatalf("YAML: %v", err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// anyEnv sets every variable, as an operator's environment would: an
// address where the name says one (MCPGW_LISTEN), a URL for a URL or an
// issuer, a placeholder otherwise.
func anyEnv(name string) (string, bool) {
	if strings.HasSuffix(name, "_LISTEN") {
		return "127.0.0.1:8080", true
	}
	if strings.HasSuffix(name, "_URL") || strings.HasSuffix(name, "_ISSUER") {
		return "https://placeholder.example/" + strings.ToLower(name), true
	}
	if strings.HasSuffix(name, "_DATA") || strings.HasSuffix(name, "_DIR") {
		return "/var/lib/placeholder/" + strings.ToLower(name), true
	}
	return "placeholder-" + strings.ToLower(name), true
}

func TestCommittedSchemaIsCurrent(t *testing.T) {
	files, err := render(repo)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(repo, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale (a config type, its doc comment, rules.go or docs/configuration.md changed); regenerate it with: go generate ./internal/config/schemagen", rel)
		}
	}
	// The chart's schema carries the same definitions, under its own root.
	var cfg, values struct {
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	_ = json.Unmarshal(files[configSchemaPath], &cfg)
	_ = json.Unmarshal(files[valuesSchemaPath], &values)
	for name, def := range cfg.Definitions {
		if !bytes.Equal(values.Definitions[name], def) {
			t.Errorf("values.schema.json's definition %s differs from the config schema's", name)
		}
	}
	if values.Definitions[valuesConfigDef] == nil || len(cfg.Definitions) < 10 {
		t.Errorf("values.schema.json has no %s, or the config schema only %d definitions", valuesConfigDef, len(cfg.Definitions))
	}
	compile(t, valuesSchemaPath)
}

// exampleConfigs returns every mcpgw config the repository ships, by name:
// configs/, docs/ and README.md examples, the Kubernetes ConfigMaps and the
// Helm chart's config: value (merged with each ci/ values file, as Helm does).
func exampleConfigs(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	read := func(rel string) []byte {
		data, err := os.ReadFile(filepath.Join(repo, rel))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	glob := func(pattern string) []string {
		m, err := filepath.Glob(filepath.Join(repo, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for i := range m {
			m[i], _ = filepath.Rel(repo, m[i])
		}
		return m
	}
	for _, f := range slices.Concat(glob("configs/*.yaml"), glob("configs/examples/*.yaml"), glob("docs/*.yaml")) {
		out[f] = read(f)
	}
	fence := regexp.MustCompile("(?ms)^```ya?ml\n(.*?)^```")
	for _, f := range slices.Concat(glob("docs/*.md"), []string{"README.md"}) {
		for i, m := range fence.FindAllSubmatch(read(f), -1) {
			var top map[string]any
			if yaml.Unmarshal(m[1], &top) == nil && top["upstreams"] != nil {
				out[fmt.Sprintf("%s yaml block %d", f, i+1)] = m[1]
			}
		}
	}
	var manifests []string
	_ = filepath.WalkDir(filepath.Join(repo, "deploy", "kubernetes"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			rel, _ := filepath.Rel(repo, p)
			manifests = append(manifests, rel)
		}
		return err
	})
	for _, f := range manifests {
		dec := yaml.NewDecoder(bytes.NewReader(read(f)))
		for {
			var doc struct {
				Kind string            `yaml:"kind"`
				Data map[string]string `yaml:"data"`
			}
			if dec.Decode(&doc) != nil {
				break
			}
			for key, v := range doc.Data {
				if doc.Kind == "ConfigMap" && strings.HasSuffix(key, ".yaml") {
					out[f+" "+key] = []byte(v)
				}
			}
		}
	}
	chart := "deploy/helm/mcpgw"
	var defaults map[string]any
	if err := yaml.Unmarshal(read(chart+"/values.yaml"), &defaults); err != nil {
		t.Fatal(err)
	}
	for _, f := range slices.Concat([]string{chart + "/values.yaml"}, glob(chart+"/ci/*.yaml")) {
		var vals map[string]any
		if err := yaml.Unmarshal(read(f), &vals); err != nil {
			t.Fatal(err)
		}
		merged := coalesce(vals["config"], defaults["config"])
		y, err := yaml.Marshal(merged)
		if err != nil {
			t.Fatal(err)
		}
		out[f+" config:"] = y
	}
	return out
}

// coalesce merges user values over defaults as Helm does: mappings merge
// key by key, a null removes the default, anything else replaces it.
func coalesce(user, def any) any {
	u, uok := user.(map[string]any)
	d, dok := def.(map[string]any)
	if !uok || !dok {
		if user == nil {
			return def
		}
		return user
	}
	out := map[string]any{}
	for k, v := range d {
		out[k] = v
	}
	for k, v := range u {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = coalesce(v, d[k])
	}
	return out
}

// Every example config is valid against the schema, and loads.
func TestExampleConfigsValidate(t *testing.T) {
	s := compile(t, configSchemaPath)
	examples := exampleConfigs(t)
	for _, want := range []string{"configs/example.yaml", "configs/default.yaml", "configs/examples/tls.yaml", "deploy/kubernetes/configmap.yaml config.yaml", "deploy/helm/mcpgw/values.yaml config:", "deploy/helm/mcpgw/ci/full-values.yaml config:"} {
		if examples[want] == nil {
			t.Errorf("example %q not found", want)
		}
	}
	for name, y := range examples {
		if err := s.Validate(instance(t, y)); err != nil {
			t.Errorf("%s does not match docs/config.schema.json:\n%v", name, err)
		}
		if _, err := config.Parse(name, y, anyEnv); err != nil {
			t.Errorf("%s does not load:\n%v", name, err)
		}
	}
}

const (
	url1    = "upstreams: {a: {url: \"https://api.example.com/mcp\"}}\n"
	withJWT = "public_url: https://mcp.example.com\n" + url1
)

// agreement cases: the schema and the loader must give the same verdict.
// Names starting "required T.k", "one of T", "min T.k" cover rules.go's
// entries (TestEveryRuleIsTested checks that each has one).
var agreement = []struct {
	name, yaml string
	ok         bool
}{
	{"minimal", url1, true},
	{"command upstream", "upstreams: {a: {command: [srv]}}", true},
	{"unknown top-level key", url1 + "listn: 127.0.0.1:1\n", false},
	{"unknown nested key", "upstreams: {a: {url: \"https://api.example.com/mcp\", timout: 1s}}", false},
	{"empty section is absent", url1 + "audit:\npolicy: ~\n", true},
	{"bool from ${VAR}", "upstreams: {a: {url: \"https://api.example.com/mcp\", stateful: \"${STATEFUL}\"}}", true},
	{"bool as yes", "upstreams: {a: {url: \"https://api.example.com/mcp\", stateful: yes}}", false},
	{"int as text", url1 + "max_body_bytes: lots\n", false},
	{"duration", "upstreams: {a: {url: \"https://api.example.com/mcp\", timeout: 1m30s}}", true},
	{"duration without unit", "upstreams: {a: {url: \"https://api.example.com/mcp\", timeout: \"30\"}}", false},
	{"rate", url1 + "policy: {default: allow, rate_limits: {principal: {rate: 5/10s}}}", true},
	{"rate without unit", url1 + "policy: {default: allow, rate_limits: {principal: {rate: \"5\"}}}", false},
	{"list where a mapping goes", "upstreams: [a]", false},
	{"bad upstream name", "upstreams: {\"-a\": {url: \"https://api.example.com/mcp\"}}", false},
	{"protocol unquoted", "upstreams: {a: {url: \"https://api.example.com/mcp\", protocol: 2026}}", true},

	{"required Config.upstreams", "listen: 127.0.0.1:1", false},
	{"required Route.path", url1 + "routes: [{upstreams: [a]}]", false},
	{"required Root.uri", "upstreams: {a: {command: [srv], roots: [{name: data}]}}", false},
	{"required APIKey.name", url1 + "auth: {api_keys: [{key: abcdefgh}]}", false},
	{"required OIDC.issuer", withJWT + "auth: {oidc: {audience: x}}", false},
	{"required Introspection.url", withJWT + "auth: {introspection: {client_id: gw, client_secret: s}}", false},
	{"required Introspection.client_id", withJWT + "auth: {introspection: {url: \"https://idp.example.com/i\", client_secret: s}}", false},
	{"required UpstreamOAuth.token_url", "upstreams: {a: {url: \"https://api.example.com/mcp\", oauth: {client_id: gw, client_secret: s}}}", false},
	{"required UpstreamOAuth.client_id", "upstreams: {a: {url: \"https://api.example.com/mcp\", oauth: {token_url: \"https://idp.example.com/t\", client_secret: s}}}", false},
	{"required Admin.listen", url1 + "admin: {}", false},
	{"required Redis.addr", url1 + "sessions: {redis: {}}", false},
	{"required ToolRateLimit.tool", url1 + "policy: {default: allow, rate_limits: {tools: [{rate: 1/s}]}}", false},
	{"required ToolRateLimit.rate", url1 + "policy: {default: allow, rate_limits: {tools: [{tool: \"a__*\"}]}}", false},
	{"required RateLimit.rate", url1 + "policy: {default: allow, rate_limits: {principal: {burst: 2}}}", false},
	{"required Pinning.mode", url1 + "policy: {default: allow, pinning: {lock_file: /x.json}}", false},
	{"required Tracing.endpoint", url1 + "tracing: {protocol: grpc}", false},

	{"one of Upstream: both", "upstreams: {a: {url: \"https://api.example.com/mcp\", command: [srv]}}", false},
	{"one of Upstream: neither", "upstreams: {a: {timeout: 1s}}", false},
	{"one of APIKey: both", url1 + "auth: {api_keys: [{name: ci, key: abcdefgh, key_file: /k}]}", false},
	{"one of APIKey: neither", url1 + "auth: {api_keys: [{name: ci}]}", false},
	{"one of Introspection: both", withJWT + "auth: {introspection: {url: \"https://idp.example.com/i\", client_id: gw, client_secret: s, client_secret_file: /s}}", false},
	{"one of Introspection: neither", withJWT + "auth: {introspection: {url: \"https://idp.example.com/i\", client_id: gw}}", false},
	{"one of UpstreamOAuth: both", "upstreams: {a: {url: \"https://api.example.com/mcp\", oauth: {token_url: \"https://idp.example.com/t\", client_id: gw, client_secret: s, client_secret_file: /s}}}", false},
	{"one of UpstreamOAuth: neither", "upstreams: {a: {url: \"https://api.example.com/mcp\", oauth: {token_url: \"https://idp.example.com/t\", client_id: gw}}}", false},
	{"login", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}}", true},
	{"required Login.provider", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {max_clients: 5}", false},
	{"required LoginProvider.issuer", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {client_id: gw, client_secret: s}}", false},
	{"required LoginProvider.client_id", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_secret: s}}", false},
	{"required LoginClient.client_id", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}, clients: [{redirect_uris: [\"http://127.0.0.1/cb\"]}]}", false},
	{"required LoginClient.redirect_uris", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}, clients: [{client_id: app}]}", false},
	{"one of LoginProvider: both", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s, client_secret_file: /s}}", false},
	{"one of LoginProvider: neither", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw}}", false},
	{"one of Redis: both", url1 + "sessions: {key_file: /k, redis: {addr: \"127.0.0.1:6379\", url: \"redis://127.0.0.1:6379\"}}", false},
	{"one of Redis: neither", url1 + "sessions: {key_file: /k, redis: {key_prefix: a}}", false},

	{"min Config.max_body_bytes", url1 + "max_body_bytes: 0", false},
	{"min Upstream.max_line_bytes", "upstreams: {a: {command: [srv], max_line_bytes: 1023}}", false},
	{"min Sandbox.max_processes", "upstreams: {a: {command: [srv], sandbox: {max_processes: 0}}}", false},
	{"min Sandbox.max_open_files", "upstreams: {a: {command: [srv], sandbox: {max_open_files: 15}}}", false},
	{"min Sandbox.egress_max_tunnels", "upstreams: {a: {command: [srv], sandbox: {egress: [\"api.example.com:443\"], egress_max_tunnels: 0}}}", false},
	{"min RateLimits.max_buckets", url1 + "policy: {default: allow, rate_limits: {max_buckets: 0}}", false},
	{"min RateLimit.burst", url1 + "policy: {default: allow, rate_limits: {principal: {rate: 1/s, burst: 0}}}", false},
	{"min ToolRateLimit.burst", url1 + "policy: {default: allow, rate_limits: {tools: [{tool: \"a__*\", rate: 1/s, burst: 0}]}}", false},
	{"min UpstreamLimit.burst", url1 + "policy: {default: allow, rate_limits: {upstreams: {a: {rate: 1/s, burst: 0}}}}", false},
	{"min UpstreamLimit.max_concurrent", url1 + "policy: {default: allow, rate_limits: {upstreams: {a: {max_concurrent: -1}}}}", false},
	{"min RouteTools.threshold", url1 + "routes: [{path: /mcp, tools: {mode: auto, threshold: 0}}]", false},
	{"min Login.max_clients", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}, max_clients: 0}", false},
	{"min Login.registrations_per_minute", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}, registrations_per_minute: 0}", false},
	{"min Login.max_grants", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}, max_grants: 0}", false},
	{"min Login.max_grants_per_user", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}, max_grants_per_user: 0}", false},
	{"min Login.max_pending", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}, max_pending: 0}", false},
	{"min Login.max_pending_per_source", url1 + "public_url: \"https://mcp.example.com\"\nlogin: {provider: {issuer: \"https://idp.example.com\", client_id: gw, client_secret: s}, max_pending_per_source: 0}", false},
	{"min Sessions.max_sessions", url1 + "sessions: {max_sessions: 0}", false},
	{"min Sessions.max_sessions_per_principal", url1 + "sessions: {max_sessions_per_principal: 0}", false},
	{"min Sessions.max_requests_per_session", url1 + "sessions: {max_requests_per_session: 0}", false},
	{"min Sessions.max_replay_streams", url1 + "sessions: {max_replay_streams: 0}", false},
	{"min Sessions.sse_queue", url1 + "sessions: {sse_queue: 0}", false},
	{"min Sessions.max_parked_calls", url1 + "sessions: {max_parked_calls: 0}", false},
	{"min Sessions.max_parked_calls_per_principal", url1 + "sessions: {max_parked_calls_per_principal: 0}", false},
	{"min Sessions.queue_bytes", url1 + "sessions: {queue_bytes: 0}", false},
	{"min Sessions.queue_total_bytes", url1 + "sessions: {queue_total_bytes: 0}", false},
	{"min Sessions.max_subscriptions_per_session", url1 + "sessions: {max_subscriptions_per_session: 0}", false},
	{"min Sessions.max_subscriptions_per_principal", url1 + "sessions: {max_subscriptions_per_principal: 0}", false},
	{"min Sessions.max_listen_streams_per_principal", url1 + "sessions: {max_listen_streams_per_principal: 0}", false},
	{"min Sessions.max_subscription_uri_bytes", url1 + "sessions: {max_subscription_uri_bytes: 0}", false},
	{"min Upstream.max_server_requests", "upstreams: {a: {command: [srv], max_server_requests: 0}}", false},
	{"min Upstream.max_server_requests_per_call", "upstreams: {a: {command: [srv], max_server_requests_per_call: 0}}", false},
	{"min Upstream.max_sessions", "upstreams: {a: {command: [srv], stateful: true, max_sessions: 0}}", false},
	{"min Upstream.max_sessions_per_principal", "upstreams: {a: {command: [srv], stateful: true, max_sessions_per_principal: 0}}", false},
	{"min Admin.max_metric_names", url1 + "admin: {listen: \"127.0.0.1:9091\", max_metric_names: 0}", false},
	{"tracing", url1 + "tracing: {endpoint: \"http://127.0.0.1:4318\", sampling_ratio: 0.5}\nadmin: {listen: \"127.0.0.1:9091\", pprof: true, max_metric_names: 1}", true},
	{"bounds at the minimum", "upstreams: {a: {command: [srv], stateful: true, max_sessions: 1, max_sessions_per_principal: 1, max_server_requests: 1, max_server_requests_per_call: 1}}\nsessions: {max_sessions: 1, max_sessions_per_principal: 1, max_requests_per_session: 1, max_replay_streams: 1, sse_queue: 1, max_parked_calls: 1, max_parked_calls_per_principal: 1, queue_bytes: 1, queue_total_bytes: 1, max_subscriptions_per_session: 1, max_subscriptions_per_principal: 1, max_listen_streams_per_principal: 1, max_subscription_uri_bytes: 1}", true},
	{"at the minimum", "upstreams: {a: {command: [srv], max_line_bytes: 1024}}\npolicy: {default: allow, rate_limits: {upstreams: {a: {max_concurrent: 0, rate: 1/s, burst: 1}}}}", true},
	{"key pattern Config.upstreams", "upstreams: {\"a b\": {url: \"https://api.example.com/mcp\"}}", false},
}

func TestSchemaAgreesWithLoader(t *testing.T) {
	s := compile(t, configSchemaPath)
	for _, c := range agreement {
		t.Run(c.name, func(t *testing.T) {
			_, loadErr := config.Parse("case.yaml", []byte(c.yaml), func(string) (string, bool) { return "true", true })
			schemaErr := s.Validate(instance(t, []byte(c.yaml)))
			if (loadErr == nil) != c.ok {
				t.Errorf("config.Parse: ok=%v, want %v (%v)", loadErr == nil, c.ok, loadErr)
			}
			if (schemaErr == nil) != c.ok {
				t.Errorf("schema: ok=%v, want %v (%v)", schemaErr == nil, c.ok, schemaErr)
			}
		})
	}
}

// enumConfigs makes a config setting one enum-valued key to v (a JSON
// value, which YAML reads as written), by rules.go entry.
var enumConfigs = map[string]func(v string) string{
	"Upstream.transport": func(v string) string {
		if v == `"stdio"` {
			return "upstreams: {a: {command: [srv], transport: " + v + "}}"
		}
		return "upstreams: {a: {url: \"https://api.example.com/mcp\", transport: " + v + "}}"
	},
	"Sandbox.runtime": func(v string) string {
		return "upstreams: {a: {command: [srv], sandbox: {runtime: " + v + "}}}"
	},
	"Sandbox.network": func(v string) string {
		if v == `"egress"` {
			return "upstreams: {a: {command: [srv], sandbox: {network: " + v + ", egress: [\"api.example.com:443\"]}}}"
		}
		return "upstreams: {a: {command: [srv], sandbox: {network: " + v + "}}}"
	},
	"Upstream.protocol": func(v string) string {
		return "upstreams: {a: {url: \"https://api.example.com/mcp\", protocol: " + v + "}}"
	},
	"UpstreamOAuth.auth_method": func(v string) string {
		return "upstreams: {a: {url: \"https://api.example.com/mcp\", oauth: {token_url: \"https://idp.example.com/t\", client_id: gw, client_secret: s, auth_method: " + v + "}}}"
	},
	"OIDC.algorithms": func(v string) string {
		return withJWT + "auth: {oidc: {issuer: \"https://idp.example.com\", algorithms: [" + v + "]}}"
	},
	"Policy.default": func(v string) string { return url1 + "policy: {default: " + v + "}" },
	"Pinning.mode": func(v string) string {
		return url1 + "policy: {default: allow, pinning: {mode: " + v + ", lock_file: /etc/mcpgw/tools.lock.json}}"
	},
	"Audit.output":    func(v string) string { return url1 + "audit: {output: " + v + "}" },
	"RouteTools.mode": func(v string) string { return url1 + "routes: [{path: /mcp, tools: {mode: " + v + "}}]" },
	"Tracing.protocol": func(v string) string {
		return url1 + "tracing: {endpoint: \"127.0.0.1:4317\", insecure: true, protocol: " + v + "}"
	},
}

// Every value the schema lists for a key is one the loader accepts, and a
// value it does not list is refused by both.
func TestEnumsMatchLoader(t *testing.T) {
	s := compile(t, configSchemaPath)
	cfg, err := render(repo)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Definitions map[string]struct {
			Properties map[string]struct {
				AnyOf []struct {
					Enum []any `json:"enum"`
				} `json:"anyOf"`
				Items struct {
					AnyOf []struct {
						Enum []any `json:"enum"`
					} `json:"anyOf"`
				} `json:"items"`
			} `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(cfg[configSchemaPath], &doc); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for id, r := range rules {
		if len(r.enum) == 0 {
			continue
		}
		mk := enumConfigs[id]
		if mk == nil {
			t.Errorf("rules.go gives %s an enum; add a config for it to enumConfigs", id)
			continue
		}
		typ, key, _ := strings.Cut(id, ".")
		p := doc.Definitions[typ].Properties[key]
		anyOf := p.AnyOf
		if anyOf == nil {
			anyOf = p.Items.AnyOf
		}
		if len(anyOf) == 0 || len(anyOf[0].Enum) < len(r.enum) {
			t.Errorf("%s: the schema lists no enum", id)
			continue
		}
		for _, v := range append(anyOf[0].Enum, "not-a-value") {
			j, _ := json.Marshal(v)
			y := mk(string(j))
			want := v != "not-a-value"
			_, loadErr := config.Parse("case.yaml", []byte(y), nil)
			if (loadErr == nil) != want {
				t.Errorf("%s = %s: config.Parse ok=%v, want %v (%v)", id, j, loadErr == nil, want, loadErr)
			}
			if err := s.Validate(instance(t, []byte(y))); (err == nil) != want {
				t.Errorf("%s = %s: schema ok=%v, want %v (%v)", id, j, err == nil, want, err)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d enum values", checked)
	}
}

// Each required key, exactly-one set and minimum in rules.go has an
// agreement case, so a rule the loader does not enforce fails a test.
func TestEveryRuleIsTested(t *testing.T) {
	var want []string
	for id, r := range rules {
		if r.minimum != nil {
			want = append(want, "min "+id)
		}
		if r.keyPattern != "" {
			want = append(want, "key pattern "+id)
		}
	}
	for typ, keys := range required {
		for _, k := range keys {
			want = append(want, "required "+typ+"."+k)
		}
	}
	for typ := range exactlyOne {
		want = append(want, "one of "+typ)
	}
	for _, w := range want {
		found := false
		for _, c := range agreement {
			if c.name == w || strings.HasPrefix(c.name, w+":") {
				found = true
			}
		}
		if !found {
			t.Errorf("no agreement case %q", w)
		}
	}
}

func TestDescribe(t *testing.T) {
	keys := map[string]string{"URL": "url", "KeyFile": "key_file", "Key": "key"}
	for _, c := range []struct {
		doc      string
		anywhere bool
		want     string
	}{
		{"URL of a server; this URL is used.", false, "url of a server; this URL is used."},
		{"Exactly one of URL or Key is set.", true, "Exactly one of url or key is set."},
		{"Key is the secret; KeyFile a file holding it.", false, "key is the secret; key_file a file holding it."},
		{"Configures the audit log (audit.go).", false, "Configures the audit log."},
		{"Authentication (see internal/auth). More.", false, "Authentication. More."},
		{"KeyFiles stays.", false, "KeyFiles stays."},
	} {
		if got := describe(c.doc, keys, c.anywhere); got != c.want {
			t.Errorf("describe(%q) = %q, want %q", c.doc, got, c.want)
		}
	}
}

func TestParseReference(t *testing.T) {
	md := "## Top level\n\n| key | type | default | meaning |\n| --- | --- | --- | --- |\n" +
		"| `listen` | string | `127.0.0.1:8080` | Address, see [docs](x.md). |\n" +
		"### `auth.oidc`, `auth.issuers[]`\n| `issuer` | string | required | The **issuer** a \\| b. |\n" +
		"```yaml\n| `fake` | x | y | z |\n```\n"
	ref := parseReference(md)
	for _, c := range []struct {
		path, key string
		want      mdRow
	}{
		{"", "listen", mdRow{def: "127.0.0.1:8080", meaning: "Address, see docs."}},
		{"auth.oidc", "issuer", mdRow{def: "required", meaning: "The issuer a | b."}},
		{"auth.issuers[]", "issuer", mdRow{def: "required", meaning: "The issuer a | b."}},
	} {
		if got := ref[c.path][c.key]; got != c.want {
			t.Errorf("ref[%q][%q] = %+v, want %+v", c.path, c.key, got, c.want)
		}
	}
	if _, ok := ref["auth.issuers[]"]["fake"]; ok {
		t.Error("a row inside a code fence was read")
	}
}
