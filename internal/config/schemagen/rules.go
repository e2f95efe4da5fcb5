package main

import "github.com/mcpgw/mcpgw/internal/config"

// What the Go types cannot say: the fixed values, bounds and required keys
// that config's validator checks. Keys are "GoType.yaml_key". A key that
// names no field is an error, so renaming a field cannot leave a rule
// behind silently; schema_test.go checks every rule against config.Parse.
// Add a row here when the validator gains a fixed set of values.

// rule constrains one field.
type rule struct {
	// enum lists the accepted values (for a list, of its items).
	enum []string
	// orPattern also accepts strings matching it (audit.output's file path).
	orPattern string
	// minimum is the least accepted integer.
	minimum *int64
	// keyPattern constrains a map's keys.
	keyPattern string
}

func atLeast(n int64) *int64 { return &n }

var rules = map[string]rule{
	"Config.max_body_bytes":        {minimum: atLeast(1)},
	"Config.upstreams":             {keyPattern: `^[A-Za-z0-9][A-Za-z0-9_.-]*$`},
	"Upstream.transport":           {enum: []string{config.TransportStreamable, config.TransportSSE, config.TransportStdio}},
	"Upstream.protocol":            {enum: []string{"auto", "2026", "legacy"}},
	"Upstream.max_line_bytes":      {minimum: atLeast(1024)},
	"Sandbox.runtime":              {enum: config.SandboxRuntimes},
	"Sandbox.network":              {enum: []string{config.SandboxNetworkNone, config.SandboxNetworkEgress}},
	"Sandbox.egress_max_tunnels":   {minimum: atLeast(1)},
	"Sandbox.max_processes":        {minimum: atLeast(1)},
	"Sandbox.max_open_files":       {minimum: atLeast(config.MinSandboxMaxOpenFiles)},
	"UpstreamOAuth.auth_method":    {enum: []string{config.AuthMethodBasic, config.AuthMethodPost}},
	"OIDC.algorithms":              {enum: config.DefaultAlgorithms},
	"Policy.default":               {enum: []string{config.PolicyAllow, config.PolicyDeny}},
	"Pinning.mode":                 {enum: []string{config.PinOff, config.PinWarn, config.PinEnforce}},
	"RateLimits.max_buckets":       {minimum: atLeast(1)},
	"RateLimit.burst":              {minimum: atLeast(1)},
	"ToolRateLimit.burst":          {minimum: atLeast(1)},
	"UpstreamLimit.burst":          {minimum: atLeast(1)},
	"UpstreamLimit.max_concurrent": {minimum: atLeast(0)},
	"RouteTools.mode":              {enum: []string{config.ToolsAll, config.ToolsSearch, config.ToolsAuto}},
	"RouteTools.threshold":         {minimum: atLeast(1)},
	"Audit.output":                 {enum: []string{config.AuditStdout, config.AuditStderr}, orPattern: `[/.]`}, // a path: absolute, or relative to the config file (audit.log)

	// login:'s bounds (config/login.go): at least one of each.
	"Login.max_clients":              {minimum: atLeast(1)},
	"Login.registrations_per_minute": {minimum: atLeast(1)},
	"Login.max_grants":               {minimum: atLeast(1)},
	"Login.max_grants_per_user":      {minimum: atLeast(1)},
	"Login.max_pending":              {minimum: atLeast(1)},
	"Login.max_pending_per_source":   {minimum: atLeast(1)},

	// The bounds (config/limits.go): at least one of each.
	"Sessions.max_sessions":                     {minimum: atLeast(1)},
	"Sessions.max_sessions_per_principal":       {minimum: atLeast(1)},
	"Sessions.max_requests_per_session":         {minimum: atLeast(1)},
	"Sessions.max_replay_streams":               {minimum: atLeast(1)},
	"Sessions.sse_queue":                        {minimum: atLeast(1)},
	"Sessions.max_parked_calls":                 {minimum: atLeast(1)},
	"Sessions.max_parked_calls_per_principal":   {minimum: atLeast(1)},
	"Sessions.queue_bytes":                      {minimum: atLeast(1)},
	"Sessions.queue_total_bytes":                {minimum: atLeast(1)},
	"Sessions.max_subscriptions_per_session":    {minimum: atLeast(1)},
	"Sessions.max_subscriptions_per_principal":  {minimum: atLeast(1)},
	"Sessions.max_listen_streams_per_principal": {minimum: atLeast(1)},
	"Sessions.max_subscription_uri_bytes":       {minimum: atLeast(1)},
	"Upstream.max_server_requests":              {minimum: atLeast(1)},
	"Upstream.max_server_requests_per_call":     {minimum: atLeast(1)},
	"Upstream.max_sessions":                     {minimum: atLeast(1)},
	"Upstream.max_sessions_per_principal":       {minimum: atLeast(1)},

	// Tracing and the per-name metrics (config/tracing.go).
	"Tracing.protocol":       {enum: []string{config.TracingHTTP, config.TracingGRPC}},
	"Admin.max_metric_names": {minimum: atLeast(1)},
}

// required lists the keys an object must have, by Go type.
var required = map[string][]string{
	"Config":        {"upstreams"},
	"Route":         {"path"},
	"Root":          {"uri"},
	"APIKey":        {"name"},
	"OIDC":          {"issuer"},
	"Introspection": {"url", "client_id"},
	"UpstreamOAuth": {"token_url", "client_id"},
	"Admin":         {"listen"},
	"ToolRateLimit": {"tool", "rate"},
	"RateLimit":     {"rate"},
	"Pinning":       {"mode"},
	"Tracing":       {"endpoint"},
	"Login":         {"provider"},
	"LoginProvider": {"issuer", "client_id"},
	"LoginClient":   {"client_id", "redirect_uris"},
}

// exactlyOne lists key sets of which an object must have exactly one, by Go
// type.
var exactlyOne = map[string][]string{
	"Upstream":      {"url", "command"},
	"APIKey":        {"key", "key_file"},
	"Introspection": {"client_secret", "client_secret_file"},
	"UpstreamOAuth": {"client_secret", "client_secret_file"},
	"Redis":         {"addr", "url", "addrs"},
	"LoginProvider": {"client_secret", "client_secret_file"},
}
