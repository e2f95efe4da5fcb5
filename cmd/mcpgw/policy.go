package main

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Exit codes of mcpgw policy explain.
const (
	exitAllowed = 0
	exitError   = 1 // the config or catalog could not be read
	exitUsage   = 2
	exitDenied  = 3 // denied, or allowed but for missing scopes
)

const policyUsage = `Usage:
  mcpgw policy explain --config FILE [principal flags] [--route PATH] (--tool NAME | --prompt NAME | --resource URI)

Prints the decision for one name and the rule that made it. Exit status:
0 allowed, 3 denied (or allowed but for missing scopes), 1 config error,
2 usage error.

Principal flags: --subject, --issuer, --groups a,b, --scopes a,b,
--client-id, --api-key NAME (fills subject, groups and scopes from the
auth.api_keys entry unless given), --client-cert FILE (a PEM client
certificate: the principal auth.client_certificates maps it to).
`

// cmdPolicy runs "mcpgw policy SUBCOMMAND".
func cmdPolicy(args []string, stdout, stderr io.Writer) int {
	return subcommand("mcpgw policy", policyUsage, map[string]command{"explain": cmdPolicyExplain}, args, stdout, stderr)
}

// command is one subcommand: its arguments after its name.
type command func(args []string, stdout, stderr io.Writer) int

// subcommand runs the subcommand args[0] names among cmds, or prints
// usage (to stdout when asked for, to stderr with exitUsage otherwise).
func subcommand(name, usage string, cmds map[string]command, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if run, ok := cmds[args[0]]; ok {
		return run(args[1:], stdout, stderr)
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "%s: unknown subcommand %q\n\n%s", name, args[0], usage)
	return exitUsage
}

// principalFlags registers the flags describing a principal, each name
// prefixed (catalog uses "as-").
type principalFlags struct {
	subject, issuer, groups, scopes, clientID, apiKey, clientCert *string
}

func addPrincipalFlags(fs *flag.FlagSet, prefix string) principalFlags {
	return principalFlags{
		subject:    fs.String(prefix+"subject", "", "the principal's `SUBJECT` (token sub or API key principal)"),
		issuer:     fs.String(prefix+"issuer", "", "the token `ISSUER`"),
		groups:     fs.String(prefix+"groups", "", "comma-separated `GROUPS`"),
		scopes:     fs.String(prefix+"scopes", "", "comma-separated OAuth `SCOPES`"),
		clientID:   fs.String(prefix+"client-id", "", "the OAuth client `ID`"),
		apiKey:     fs.String(prefix+"api-key", "", "the auth.api_keys entry `NAME` used"),
		clientCert: fs.String(prefix+"client-cert", "", "a PEM client certificate `FILE`: the principal auth.client_certificates maps it to"),
	}
}

// principal builds the Principal; an API key fills in what the flags leave out.
func (f principalFlags) principal(cfg *config.Config) (policy.Principal, error) {
	p := policy.Principal{
		Subject: *f.subject, Issuer: *f.issuer, ClientID: *f.clientID,
		Groups: splitList(*f.groups), Scopes: splitList(*f.scopes), APIKey: *f.apiKey,
	}
	if *f.clientCert != "" {
		return f.certPrincipal(cfg, p)
	}
	if p.APIKey == "" {
		return p, nil
	}
	var names []string
	if cfg.Auth != nil {
		for _, k := range cfg.Auth.APIKeys {
			names = append(names, k.Name)
			if k.Name != p.APIKey {
				continue
			}
			if p.Subject == "" {
				p.Subject = k.Principal
				if p.Subject == "" {
					p.Subject = k.Name
				}
			}
			if p.Groups == nil {
				p.Groups = k.Groups
			}
			if p.Scopes == nil {
				p.Scopes = k.Scopes
			}
			return p, nil
		}
	}
	return p, fmt.Errorf("there is no API key named %q in auth.api_keys (have: %s)", p.APIKey, strings.Join(names, ", "))
}

// certPrincipal fills p from a client certificate as the gateway would
// (auth.client_certificates); the flags given win. The certificate is not
// verified: explain answers what the policy makes of it once it is.
func (f principalFlags) certPrincipal(cfg *config.Config, p policy.Principal) (policy.Principal, error) {
	if cfg.Auth == nil || cfg.Auth.ClientCertificates == nil {
		return p, fmt.Errorf("--client-cert needs auth.client_certificates in the config")
	}
	data, err := os.ReadFile(*f.clientCert)
	if err != nil {
		return p, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return p, fmt.Errorf("%s: no PEM certificate in it", *f.clientCert)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return p, fmt.Errorf("%s: %w", *f.clientCert, err)
	}
	cc := cfg.Auth.ClientCertificates
	if p.Subject == "" {
		if p.Subject = auth.CertificateSubject(cert, cc.PrincipalField()); p.Subject == "" {
			return p, fmt.Errorf("%s has no %s to name its principal (auth.client_certificates.principal)", *f.clientCert, cc.PrincipalField())
		}
	}
	if p.Groups == nil {
		p.Groups = cc.Groups
	}
	if p.Scopes == nil {
		p.Scopes = cc.Scopes
	}
	return p, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// policyContext loads the config and compiles its policy, and resolves
// the route (default: the first).
func policyContext(cmd, path, route string, stderr io.Writer) (*config.Config, *policy.Policy, string, int) {
	if path == "" {
		fmt.Fprintf(stderr, "mcpgw %s: --config FILE is required\n", cmd)
		return nil, nil, "", exitUsage
	}
	cfg, err := loadConfig(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, "", exitError
	}
	pol, err := policy.Compile(cfg.Policy)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, "", exitError
	}
	var paths []string
	for _, r := range cfg.Routes {
		paths = append(paths, r.Path)
	}
	switch {
	case route == "":
		route = paths[0] // config.Parse guarantees a route
	case !containsString(paths, route):
		fmt.Fprintf(stderr, "mcpgw %s: there is no route %q in the config (routes: %s)\n", cmd, route, strings.Join(paths, ", "))
		return nil, nil, "", exitUsage
	}
	return cfg, pol, route, 0
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func cmdPolicyExplain(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcpgw policy explain --config FILE (--tool NAME | --prompt NAME | --resource URI) [principal flags]")
	path := fs.String("config", "", "config `FILE`")
	fs.StringVar(path, "c", "", "shorthand for --config")
	route := fs.String("route", "", "route `PATH` (default: the first route)")
	tool := fs.String("tool", "", "tool `NAME` as clients see it, e.g. github__create_issue")
	prompt := fs.String("prompt", "", "prompt `NAME` as clients see it")
	resource := fs.String("resource", "", "resource `URI` or URI template as clients see it")
	pf := addPrincipalFlags(fs, "")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw policy explain: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var kind, name string
	n := 0
	for _, c := range []struct{ kind, name string }{{policy.KindTool, *tool}, {policy.KindPrompt, *prompt}, {policy.KindResource, *resource}} {
		if c.name != "" {
			kind, name = c.kind, c.name
			n++
		}
	}
	if n != 1 {
		fmt.Fprintln(stderr, "mcpgw policy explain: give exactly one of --tool, --prompt or --resource")
		return exitUsage
	}
	cfg, pol, rt, code := policyContext("policy explain", *path, *route, stderr)
	if cfg == nil {
		return code
	}
	p, err := pf.principal(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw policy explain:", err)
		return exitUsage
	}
	curated := ""
	if kind == policy.KindTool {
		if canonical, ok := curatedTool(cfg, rt, name); ok {
			curated, name = name, canonical // policy judges the upstream's name
		}
	}
	d := pol.Decide(p, rt, kind, name)
	verdict := "DENY"
	if d.Allowed {
		verdict = "ALLOW"
	}
	fmt.Fprintf(stdout, "%s %s %s\n", verdict, kind, name)
	fmt.Fprintf(stdout, "  principal: %s\n", p.Describe())
	fmt.Fprintf(stdout, "  route:     %s\n", rt)
	if curated != "" {
		fmt.Fprintf(stdout, "  curated:   %s is the route's name for %s (tool curation); rules match %s\n", curated, name, name)
	}
	if d.Rule >= 0 {
		fmt.Fprintf(stdout, "  rule:      policy.rules[%d], pattern %s\n", d.Rule, d.Pattern)
	} else {
		fmt.Fprintf(stdout, "  rule:      none (policy.default: %s)\n", cfg.Policy.Default)
	}
	if kind == policy.KindTool {
		if req := pol.RequiredScopes(name); len(req) > 0 {
			fmt.Fprintf(stdout, "  scopes:    requires %s\n", strings.Join(req, " "))
		}
	}
	if len(d.MissingScopes) > 0 {
		fmt.Fprintf(stdout, "  missing:   %s (the caller gets an insufficient_scope challenge; the tool stays listed)\n", strings.Join(d.MissingScopes, " "))
	}
	fmt.Fprintf(stdout, "  reason:    %s\n", d.Reason)
	if d.Allowed {
		return exitAllowed
	}
	return exitDenied
}

const catalogUsage = `Usage:
  mcpgw catalog --config FILE (--catalog FILE.json | --live URL) [principal flags] [--route PATH] [--kind KIND] [--all | --json]

Prints what a principal would see from a recorded catalog, without
starting any upstream, or from a running gateway's live catalog: --live
takes its admin listener's URL (e.g. http://127.0.0.1:9091) and asks
/status/catalog?route=PATH, with the token of the config's
admin.token_file when it names one. FILE.json is a list result (tools/list,
prompts/list, resources/list, resources/templates/list), a JSON-RPC
response carrying one, an object holding several of the arrays tools,
prompts, resources and resourceTemplates, or a bare JSON array of items
(of --kind, default tool). Names are as clients see them on the route.

Principal flags: --as-subject, --as-issuer, --as-groups a,b, --as-scopes a,b,
--as-client-id, --as-api-key NAME.
`

func cmdCatalog(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcpgw catalog --config FILE [flags]")
	fs.Usage = func() { fmt.Fprint(fs.Output(), catalogUsage+"\nFlags:\n"); printFlags(fs) }
	path := fs.String("config", "", "config `FILE`")
	fs.StringVar(path, "c", "", "shorthand for --config")
	catalog := fs.String("catalog", "", "recorded catalog `FILE.json` (- for stdin)")
	live := fs.String("live", "", "a running gateway's admin `URL`: use its live catalog of the route")
	route := fs.String("route", "", "route `PATH` (default: the first route)")
	kindFlag := fs.String("kind", policy.KindTool, "item `KIND` of a bare array: tool, prompt or resource")
	all := fs.Bool("all", false, "list every item with its decision and reason")
	asJSON := fs.Bool("json", false, "print the filtered catalog JSON")
	pf := addPrincipalFlags(fs, "as-")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw catalog: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	switch {
	case *catalog == "" && *live == "":
		fmt.Fprintln(stderr, "mcpgw catalog: --catalog FILE.json or --live URL is required")
		return exitUsage
	case *catalog != "" && *live != "":
		fmt.Fprintln(stderr, "mcpgw catalog: --catalog and --live do not go together; give one")
		return exitUsage
	}
	if *all && *asJSON {
		fmt.Fprintln(stderr, "mcpgw catalog: --all and --json do not go together")
		return exitUsage
	}
	switch *kindFlag {
	case policy.KindTool, policy.KindPrompt, policy.KindResource:
	default:
		fmt.Fprintf(stderr, "mcpgw catalog: --kind %q: use tool, prompt or resource\n", *kindFlag)
		return exitUsage
	}
	cfg, pol, rt, code := policyContext("catalog", *path, *route, stderr)
	if cfg == nil {
		return code
	}
	p, err := pf.principal(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw catalog:", err)
		return exitUsage
	}
	var data []byte
	switch {
	case *live != "":
		data, err = liveCatalog(*live, rt, cfg.Admin)
		*catalog = *live + " (route " + rt + ")" // named in the messages below
	case *catalog == "-":
		data, err = io.ReadAll(os.Stdin)
	default:
		data, err = os.ReadFile(*catalog)
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw catalog:", err)
		return exitError
	}
	if !json.Valid(data) {
		fmt.Fprintf(stderr, "mcpgw catalog: %s is not valid JSON\n", *catalog)
		return exitError
	}
	// A JSON-RPC response: use its result.
	if res, ok := rawjson.Get(data, "result"); ok {
		data = res
	}
	kinds := []string{*kindFlag}
	if firstNonSpace(data) == '{' {
		kinds = nil
		for _, k := range []struct{ kind, array string }{
			{policy.KindTool, "tools"}, {policy.KindPrompt, "prompts"},
			{policy.KindResource, "resources"}, {policy.KindResource, "resourceTemplates"},
		} {
			if _, ok := rawjson.Get(data, k.array); ok && !containsString(kinds, k.kind) {
				kinds = append(kinds, k.kind)
			}
		}
		if len(kinds) == 0 {
			fmt.Fprintf(stderr, "mcpgw catalog: %s holds none of tools, prompts, resources or resourceTemplates\n", *catalog)
			return exitError
		}
	}
	out := json.RawMessage(data)
	for _, kind := range kinds {
		out, err = policy.FilterListFunc(kind, out, func(kind, name string, _ []byte) bool {
			d := pol.Decide(p, rt, kind, name)
			switch {
			case *all:
				verdict := "deny "
				if d.Allowed {
					verdict = "allow"
				} else if d.Listed() {
					verdict = "scope" // listed, but calling needs more scopes
				}
				fmt.Fprintf(stdout, "%s %-8s %s\t%s\n", verdict, kind, name, d.Reason)
			case !*asJSON && d.Listed():
				fmt.Fprintf(stdout, "%-8s %s\n", kind, name)
			}
			return d.Listed()
		})
		if err != nil {
			fmt.Fprintf(stderr, "mcpgw catalog: %s: %v\n", *catalog, err)
			return exitError
		}
	}
	if *asJSON {
		fmt.Fprintf(stdout, "%s\n", out)
	}
	return 0
}

// liveCatalog asks a running gateway's admin listener for route's catalog,
// with the admin token of the config's admin.token_file when it names one
// (the gateway then requires it for /status/*).
func liveCatalog(base, route string, admin *config.Admin) ([]byte, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/status/catalog")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--live %q: give the admin listener's URL, e.g. http://127.0.0.1:9091", base)
	}
	u.RawQuery = url.Values{"route": {route}}.Encode()
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("--live %q: %w", base, err)
	}
	if admin != nil && admin.TokenFile != "" {
		tok, err := os.ReadFile(admin.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--live: admin.token_file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--live: %w (is the gateway running with admin.listen at %s?)", err, base)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("--live: reading %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("--live: %s answered HTTP %d: %s", u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return body, nil
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c
		}
	}
	return 0
}

// curatedTool returns the upstream's name (as the route's policy judges
// it) of a tool the route renames to name (tools.curate, or an upstream's
// curate on the route).
func curatedTool(cfg *config.Config, route, name string) (string, bool) {
	for _, r := range cfg.Routes {
		if r.Path != route {
			continue
		}
		if r.Tools != nil {
			for _, c := range r.Tools.Curate {
				if c != nil && c.Rename == name {
					return c.Tool, true
				}
			}
		}
		for _, up := range cfg.RouteUpstreams(r) {
			u := cfg.Upstreams[up]
			if u == nil {
				continue
			}
			for _, c := range u.Curate {
				if c != nil && c.Rename == name {
					if r.Prefixed() {
						return up + cfg.Separator + c.Tool, true
					}
					return c.Tool, true
				}
			}
		}
	}
	return "", false
}
