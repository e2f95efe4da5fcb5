package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// validator checks a decoded, defaulted Config and collects every problem.
type validator struct {
	cfg      *Config
	dec      *strictyaml.Decoder
	problems Problems
}

// add reports a problem about a value. It stays quiet when the value, or one
// inside or around it, already failed to decode: the check would only see a
// zero value and repeat the decode problem in a confusing form.
func (v *validator) add(p, msg string) {
	for _, f := range v.dec.Failed() {
		if within(f, p) || within(p, f) {
			return
		}
	}
	v.addAlways(p, msg)
}

// addAlways reports a problem that does not depend on decoded values (such as
// a bad upstream name), so it is worth reporting even next to decode problems.
func (v *validator) addAlways(p, msg string) {
	v.problems = append(v.problems, Problem{Line: v.line(p), Path: p, Msg: msg})
}

// line finds the line that sets p or, failing that, its closest parent.
func (v *validator) line(p string) int {
	for {
		if l, ok := v.dec.Line(p); ok {
			return l
		}
		if p == "" {
			return 0
		}
		p = strictyaml.ParentPath(p)
	}
}

// within reports whether path p is inner or equal to path outer.
func within(p, outer string) bool {
	if outer == "" || p == outer {
		return true
	}
	return strings.HasPrefix(p, outer) && (p[len(outer)] == '.' || p[len(outer)] == '[')
}

func (v *validator) validate() {
	c := v.cfg
	v.address("listen", c.Listen, DefaultListen+" (or :8080 for every interface)")
	if c.PublicURL != "" {
		v.httpURL("public_url", c.PublicURL, "https://mcp.example.com")
	}
	v.separator()
	if c.MaxBodyBytes <= 0 {
		v.add("max_body_bytes", fmt.Sprintf("must be more than 0 bytes; remove it for the default (%d, 4 MiB) or set e.g. 8388608", DefaultMaxBodyBytes))
	}
	v.pageSize("page_size", c.PageSize)
	v.origins()
	v.upstreams()
	v.routes()
	v.auth()
	v.introspection() // introspection.go
	v.dpop()          // dpop.go
	v.login()         // login.go
	v.admin()
	v.sessions()
	v.limits() // limits.go
	v.policy()
	v.audit()        // audit.go
	v.tracing()      // tracing.go
	v.tls()          // tls.go
	v.interceptors() // interceptors.go
}

func (v *validator) separator() {
	sep := v.cfg.Separator
	switch {
	case sep == "":
		v.add("separator", `is empty, so "<upstream><separator><tool>" could not be split; remove it for the default "__" or set e.g. "__"`)
	case strings.ContainsFunc(sep, isSpace):
		v.add("separator", fmt.Sprintf(`%q contains whitespace, which clients mangle in tool names; use e.g. "__"`, sep))
	case strings.Contains(sep, "/"):
		v.add("separator", fmt.Sprintf(`%q contains "/", which would break resource URIs and paths; use e.g. "__"`, sep))
	}
}

func (v *validator) origins() {
	for i, o := range v.cfg.AllowedOrigins {
		p := fmt.Sprintf("allowed_origins[%d]", i)
		if o == "*" || o == "null" {
			v.add(p, fmt.Sprintf(`%q is not allowed: it would let any web page a user visits call the gateway, which disables the Origin check that protects against DNS rebinding; list each origin, e.g. "https://app.example.com"`, o))
			continue
		}
		u, err := url.Parse(o)
		if err == nil && u.Scheme != "" && u.Host != "" && u.User == nil && u.Path == "" && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && !strings.Contains(u.Host, "*") {
			// Browsers send origins in lower case; match them as sent.
			v.cfg.AllowedOrigins[i] = strings.ToLower(o)
			continue
		}
		example := "https://app.example.com"
		if err == nil && u.Scheme != "" && u.Host != "" && !strings.Contains(u.Host, "*") {
			example = u.Scheme + "://" + u.Host
		}
		if strings.Contains(o, "*") {
			v.add(p, fmt.Sprintf("%q is not an origin: wildcards are not supported; list each origin, e.g. %q", o, example))
			continue
		}
		v.add(p, fmt.Sprintf("%q is not an origin: an origin is scheme://host[:port] with no path; write e.g. %q", o, example))
	}
}

func (v *validator) upstreams() {
	c := v.cfg
	if len(c.Upstreams) == 0 {
		v.add("upstreams", "no upstreams are configured; add at least one under upstreams:, with url: for an HTTP server or command: for a stdio child")
		return
	}
	for _, name := range slices.Sorted(maps.Keys(c.Upstreams)) {
		v.upstream(name, c.Upstreams[name])
	}
}

func (v *validator) upstream(name string, u *Upstream) {
	p := strictyaml.JoinPath("upstreams", name)
	sep := v.cfg.Separator
	if u != nil {
		v.curation(p+".curate", u.Curate, nil, nil)
	}
	switch {
	case !validName(name):
		v.addAlways(p, fmt.Sprintf("%q is not a valid upstream name; use letters, digits, _, . and -, starting with a letter or digit (e.g. github)", name))
	case sep != "" && strings.Contains(name, sep):
		v.addAlways(p, fmt.Sprintf("the name contains the separator %q, so a name like %q would be ambiguous in \"<upstream>%s<tool>\"; rename the upstream (e.g. %q) or change separator",
			sep, name+sep+"tool", sep, strings.ReplaceAll(name, sep, "-")))
	}
	if u == nil {
		v.add(p, "is empty; give it url: for an HTTP server or command: [program, args...] for a stdio child")
		return
	}
	hasURL, hasCmd := u.kind(p, v.dec)
	switch {
	case hasURL && hasCmd:
		v.add(p, "both url and command are set; keep url for an HTTP server or command for a stdio child")
	case !hasURL && !hasCmd:
		v.add(p, "neither url nor command is set; give url: for an HTTP server or command: [program, args...] for a stdio child")
	case hasURL:
		v.httpURL(strictyaml.JoinPath(p, "url"), u.URL, "https://api.example.com/mcp")
		if u.Transport != TransportStreamable && u.Transport != TransportSSE {
			v.add(strictyaml.JoinPath(p, "transport"), fmt.Sprintf("%q is not a transport for a url upstream; use streamable (Streamable HTTP, the default) or sse (legacy HTTP+SSE)", u.Transport))
		}
		if len(u.Env) > 0 {
			v.add(strictyaml.JoinPath(p, "env"), "env applies only to command upstreams (it sets the child's environment); remove it, or send values to an HTTP server with headers:")
		}
		if u.Dir != "" {
			v.add(strictyaml.JoinPath(p, "dir"), "dir applies only to command upstreams (the child's working directory); remove it")
		}
		if len(u.InheritEnv) > 0 {
			v.add(strictyaml.JoinPath(p, "inherit_env"), "inherit_env applies only to command upstreams (the gateway variables a child gets); remove it")
		}
	case hasCmd:
		switch {
		case len(u.Command) == 0:
			v.add(strictyaml.JoinPath(p, "command"), "is empty; give the program and its arguments, e.g. [node, server.js]")
		case strings.TrimSpace(u.Command[0]) == "":
			v.add(strictyaml.JoinPath(p, "command")+"[0]", "the program name is empty; put the program to run first, e.g. [node, server.js]")
		}
		if u.Transport != TransportStdio {
			v.add(strictyaml.JoinPath(p, "transport"), fmt.Sprintf("%q does not apply to a command upstream, which always speaks stdio; remove transport, or use url: for an HTTP server", u.Transport))
		}
		if len(u.Headers) > 0 {
			v.add(strictyaml.JoinPath(p, "headers"), "headers apply only to url upstreams; remove them, or pass values to the child with env:")
		}
		v.inheritEnv(strictyaml.JoinPath(p, "inherit_env"), u.InheritEnv)
	}
	if u.Timeout <= 0 {
		v.add(strictyaml.JoinPath(p, "timeout"), fmt.Sprintf("must be more than 0; remove it for the default (%s) or set e.g. 30s", DefaultTimeout))
	}
	if u.StartupTimeout <= 0 {
		v.add(strictyaml.JoinPath(p, "startup_timeout"), fmt.Sprintf("must be more than 0; remove it for the default (%s) or set e.g. 10s", DefaultStartupTimeout))
	}
	switch {
	case u.StartupListWait < 0:
		v.add(strictyaml.JoinPath(p, "startup_list_wait"), fmt.Sprintf("must not be negative; use 0s to never wait for the upstream, or remove it for the default (%s)", DefaultStartupListWait))
	case u.StartupTimeout > 0 && u.StartupListWait > u.StartupTimeout:
		v.add(strictyaml.JoinPath(p, "startup_list_wait"), fmt.Sprintf("%s is longer than startup_timeout (%s), which ends the first connection attempt; set it to at most %s", u.StartupListWait.D(), u.StartupTimeout.D(), u.StartupTimeout.D()))
	}
	v.stderr(p, u, hasURL && !hasCmd)  // stderr.go
	v.sandbox(p, u, hasURL && !hasCmd) // sandbox.go
	if u.MaxLineBytes < 1024 {
		v.add(strictyaml.JoinPath(p, "max_line_bytes"), fmt.Sprintf("must be at least 1024 bytes; remove it for the default (%d, 8 MiB) or set e.g. 16777216", DefaultMaxLineBytes))
	}
	switch u.Protocol {
	case "", "auto", "2026", "legacy":
	default:
		v.add(strictyaml.JoinPath(p, "protocol"), fmt.Sprintf("%q is not a protocol choice; use auto (the default), 2026 or legacy", u.Protocol))
	}
	if u.ExactCapabilities && u.Protocol == "2026" {
		v.add(strictyaml.JoinPath(p, "exact_capabilities"), `has no effect with protocol: "2026", where every request carries its caller's capabilities; remove it, or use protocol: auto`)
	}
	v.upstreamOAuth(p, u, hasCmd && !hasURL)      // upstream_oauth.go
	v.upstreamAuth(p, name, u, hasCmd && !hasURL) // upstream_auth.go
	v.statefulLimits(p, u)                        // limits.go
	v.serverRequestLimits(p, u)                   // limits.go
	v.upstreamTLS(p, u, hasCmd && !hasURL)        // tls.go
	v.forwardHeaders(p, u, hasCmd && !hasURL)     // forward_headers.go
	for i, r := range u.Roots {
		rp := fmt.Sprintf("%s.roots[%d]", p, i)
		if !strings.HasPrefix(r.URI, "file://") {
			v.add(strictyaml.JoinPath(rp, "uri"), fmt.Sprintf("%q must be a file:// URI (MCP roots are filesystem locations); write it as e.g. file:///srv/data", r.URI))
		}
	}
}

func (v *validator) routes() {
	c := v.cfg
	known := slices.Sorted(maps.Keys(c.Upstreams))
	byPath := map[string]int{}
	for i, r := range c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		if r == nil {
			v.add(p, "is empty; give the route a path, e.g. \"- path: /mcp\"")
			continue
		}
		v.routePath(p, r.Path)
		if first, dup := byPath[r.Path]; dup && r.Path != "" {
			v.add(p+".path", fmt.Sprintf("%q is also the path of routes[%d]; give each route its own path", r.Path, first))
		} else {
			byPath[r.Path] = i
		}
		listed := map[string]bool{}
		for j, name := range r.Upstreams {
			up := fmt.Sprintf("%s.upstreams[%d]", p, j)
			switch {
			case listed[name]:
				v.add(up, fmt.Sprintf("%q is listed twice; remove one", name))
			case !slices.Contains(known, name):
				msg := fmt.Sprintf("there is no upstream named %q", name)
				if s := strictyaml.Closest(name, known); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				} else if len(known) > 0 {
					msg += "; use one of: " + strings.Join(known, ", ")
				} else {
					msg += "; define it under upstreams:"
				}
				v.add(up, msg)
			}
			listed[name] = true
		}
		if v.dec.Set(p + ".page_size") {
			v.pageSize(p+".page_size", r.PageSize) // else the top level's, judged there
		}
		if r.BareNames != nil && !r.Prefixed() {
			v.add(p+".bare_names", "applies only to prefixed routes: with prefix: false every name is the upstream's own already; remove bare_names")
		}
		v.routeTools(p+".tools", r)
		if !r.Prefixed() {
			if names := c.RouteUpstreams(r); len(names) != 1 {
				v.add(p+".prefix", fmt.Sprintf("prefix: false needs exactly one upstream, but this route exposes %d (%s), whose tool, prompt and resource names could collide without the prefix; list a single upstream under upstreams: or remove prefix: false",
					len(names), strings.Join(names, ", ")))
			}
		}
	}
}

// routeTools checks a route's discovery mode (routes[].tools).
func (v *validator) routeTools(p string, r *Route) {
	t := r.Tools
	if t == nil {
		return
	}
	modes := []string{ToolsAll, ToolsSearch, ToolsAuto}
	if t.Mode != "" && !slices.Contains(modes, t.Mode) {
		v.add(p+".mode", fmt.Sprintf("unknown mode %q; use one of: %s (all lists every tool, search lists only %s%ssearch_tools and %s%scall_tool, auto searches above threshold tools)",
			t.Mode, strings.Join(modes, ", "), MetaUpstream, v.cfg.Separator, MetaUpstream, v.cfg.Separator))
	}
	if v.dec.Set(p + ".threshold") {
		switch {
		case r.ToolsMode() != ToolsAuto && t.Threshold == 0:
			// 0 is unset (what show writes for a tools block without it).
		case r.ToolsMode() != ToolsAuto:
			v.add(p+".threshold", fmt.Sprintf("applies only to mode: auto (this route's mode is %s); remove threshold, or set mode: auto", r.ToolsMode()))
		case t.Threshold < 1:
			v.add(p+".threshold", fmt.Sprintf("%d is not a threshold: auto switches to search above this many visible tools, so it must be at least 1; remove it for the default (%d)", t.Threshold, DefaultToolsThreshold))
		}
	}
	var prefixes []string
	if r.Prefixed() {
		for _, up := range v.cfg.RouteUpstreams(r) {
			prefixes = append(prefixes, up+v.cfg.Separator)
		}
	}
	v.curation(p+".curate", t.Curate, prefixes, t.Expose)
	for i, e := range t.Expose {
		if e == "" {
			v.add(fmt.Sprintf("%s.expose[%d]", p, i), "is empty; name a tool as the route lists it, or a glob (github"+v.cfg.Separator+"*)")
		}
	}
	search := r.ToolsMode() != ToolsAll
	if len(t.Always) > 0 && !search {
		v.add(p+".always", "applies only to mode: search or auto (with mode: all every tool is listed already); remove always, or set a mode")
	}
	ups := v.cfg.RouteUpstreams(r)
	seen := map[string]bool{}
	for i, name := range t.Always {
		ap := fmt.Sprintf("%s.always[%d]", p, i)
		switch {
		case name == "":
			v.add(ap, "is empty; name a tool as the route lists it, e.g. github"+v.cfg.Separator+"create_issue")
		case seen[name]:
			v.add(ap, fmt.Sprintf("%q is listed twice; remove one", name))
		case r.Prefixed() && strings.Contains(name, v.cfg.Separator):
			if up, _, _ := strings.Cut(name, v.cfg.Separator); !slices.Contains(ups, up) {
				v.add(ap, fmt.Sprintf("%q names upstream %q, which is not on this route; use one of: %s", name, up, strings.Join(ups, ", ")))
			}
		}
		seen[name] = true
	}
	if slices.Contains([]string{ToolsSearch, ToolsAuto}, r.ToolsMode()) && r.Prefixed() && slices.Contains(ups, MetaUpstream) {
		v.add(p+".mode", fmt.Sprintf("in mode %s the gateway's own tools are named %s%s..., so an upstream named %q would collide with them; rename that upstream, or set mode: all", r.ToolsMode(), MetaUpstream, v.cfg.Separator, MetaUpstream))
	}
}

// pageSize checks a page_size: a merged list page is built in memory, so
// it is bounded, and a page must hold something.
func (v *validator) pageSize(p string, n int) {
	if n < 1 || n > MaxPageSize {
		v.add(p, fmt.Sprintf("%d is not a page size: a list page holds between 1 and %d items; remove it for the default (%d) or set e.g. 1000", n, MaxPageSize, DefaultPageSize))
	}
}

func (v *validator) routePath(p, rp string) {
	p += ".path"
	switch {
	case rp == "":
		v.add(p, "is not set; give the route a path such as /mcp")
	case !strings.HasPrefix(rp, "/"):
		v.add(p, fmt.Sprintf("%q must start with /; write %q", rp, "/"+rp))
	case strings.ContainsAny(rp, "?#") || strings.ContainsFunc(rp, isSpace):
		v.add(p, fmt.Sprintf("%q must be a plain path without ?, # or spaces; write e.g. /mcp", rp))
	case strings.ContainsAny(rp, "{}*"):
		// chi would read {name} and * as patterns: /mcp/{team} would serve
		// /mcp/anything. A route is one literal path.
		v.add(p, fmt.Sprintf("%q contains %q, which the HTTP router would read as a pattern; a route is one literal path: write e.g. /mcp/team-a, one route per path", rp, string(rp[strings.IndexAny(rp, "{}*")])))
	case strings.IndexFunc(rp, notPathChar) >= 0:
		c, _ := utf8.DecodeRuneInString(rp[strings.IndexFunc(rp, notPathChar):])
		v.add(p, fmt.Sprintf("%q contains %q; a route path is made of letters, digits and - . _ ~ between slashes, e.g. /mcp/fs", rp, string(c)))
	case path.Clean(rp) != rp:
		v.add(p, fmt.Sprintf("%q is not a clean path (trailing /, // or dot segments); write %q", rp, path.Clean(rp)))
	case rp == "/.well-known" || strings.HasPrefix(rp, "/.well-known/"):
		v.add(p, fmt.Sprintf("%q is reserved for OAuth metadata documents; use another path such as /mcp", rp))
	}
}

// notPathChar reports whether r is outside a plain route path: ASCII
// letters and digits, - . _ ~ (RFC 3986 unreserved) and the / separator.
func notPathChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("-._~/", r)
}

func (v *validator) auth() {
	c := v.cfg
	a := c.Auth
	v.exposure()
	for i, r := range c.Routes {
		if r == nil {
			continue
		}
		p := fmt.Sprintf("routes[%d].scopes", i)
		v.scopes(p, r.Scopes)
		if len(r.Scopes) > 0 && !a.Enabled() {
			v.add(p, "scopes need authentication, but auth has no oidc, issuers or api_keys; configure one, or remove scopes")
		}
	}
	if a == nil {
		return
	}
	if a.InsecureNoAuth && a.Enabled() {
		v.add("auth.insecure_no_auth", "insecure_no_auth turns authentication off, yet oidc, issuers or api_keys are configured too; remove insecure_no_auth, or the others")
	}
	v.scopes("auth.required_scopes", a.RequiredScopes)
	if len(a.RequiredScopes) > 0 && !a.Enabled() {
		v.add("auth.required_scopes", "scopes need authentication, but auth has no oidc, issuers or api_keys; configure one, or remove required_scopes")
	}
	if len(a.AllIssuers()) > 0 && c.PublicURL == "" {
		v.add("auth", "token issuers are configured but public_url is not set; set public_url to the URL clients reach the gateway at (e.g. https://mcp.example.com): it is the canonical resource URI that tokens must be issued for (unless an issuer sets audience:), and the protected resource metadata and WWW-Authenticate challenges name it")
	}
	seen := map[string]string{}
	if a.OIDC != nil {
		v.issuer("auth.oidc", a.OIDC, seen)
	}
	for i, o := range a.Issuers {
		p := fmt.Sprintf("auth.issuers[%d]", i)
		if o == nil {
			v.add(p, "is empty; give the issuer: URL, or remove the item")
			continue
		}
		v.issuer(p, o, seen)
	}
	names := map[string]int{}
	for i, k := range a.APIKeys {
		p := fmt.Sprintf("auth.api_keys[%d]", i)
		if k.Name == "" {
			v.add(p+".name", "is not set; name each key (e.g. ci) so logs and metrics can tell keys apart")
		} else if first, dup := names[k.Name]; dup {
			v.add(p+".name", fmt.Sprintf("%q is also the name of auth.api_keys[%d]; give each key its own name", k.Name, first))
		} else {
			names[k.Name] = i
		}
		switch {
		case k.Key != "" && k.KeyFile != "":
			v.add(p, "both key and key_file are set; keep key_file (a file holding the secret) or key, not both")
		case k.Key == "" && k.KeyFile == "":
			v.add(p, "neither key nor key_file is set; set key_file: /run/secrets/NAME, or key: ${ENV_VAR}")
		case strings.ContainsFunc(strings.TrimSpace(k.Key), isSpace):
			// The message never quotes the key.
			v.add(p+".key", "contains whitespace, which a client cannot send in an Authorization header; generate a key with e.g. openssl rand -base64 32")
		}
		v.scopes(p+".scopes", k.Scopes)
	}
}

// exposure refuses a non-loopback listener that nobody has to authenticate
// to, unless the operator says so explicitly.
func (v *validator) exposure() {
	c := v.cfg
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil || IsLoopbackHost(host) || c.Auth.Enabled() || (c.Auth != nil && c.Auth.InsecureNoAuth) {
		return
	}
	v.add("listen", fmt.Sprintf("%q is not a loopback address, and no authentication is configured, so anyone who can reach it could use every upstream; configure auth.oidc or auth.api_keys, listen on 127.0.0.1, or (not recommended) set auth.insecure_no_auth: true", c.Listen))
}

// IsLoopbackHost reports whether a listen host only accepts connections
// from this machine: localhost or a loopback IP. "" and 0.0.0.0 are every
// interface.
func IsLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// allowedAlgorithms are the JWS algorithms an issuer may use.
var allowedAlgorithms = DefaultAlgorithms

func (v *validator) issuer(p string, o *OIDC, seen map[string]string) {
	switch {
	case o.Issuer == "":
		v.add(p+".issuer", "is not set; give the token issuer's URL, e.g. https://idp.example.com")
	default:
		if v.secureURL(p+".issuer", o.Issuer, "https://idp.example.com") {
			if u, _ := url.Parse(o.Issuer); u.RawQuery != "" {
				v.add(p+".issuer", fmt.Sprintf("%q has a query, which an issuer identifier must not; write e.g. https://idp.example.com/realms/main", o.Issuer))
			}
		}
		if first, dup := seen[o.Issuer]; dup {
			v.add(p+".issuer", fmt.Sprintf("%q is also the issuer of %s; configure each issuer once", o.Issuer, first))
		} else {
			seen[o.Issuer] = p
		}
	}
	if strings.TrimSpace(o.Audience) != o.Audience {
		v.add(p+".audience", fmt.Sprintf("%q has surrounding whitespace; remove it", o.Audience))
	}
	if o.JWKSURL != "" {
		v.secureURL(p+".jwks_url", o.JWKSURL, "https://idp.example.com/jwks.json")
	}
	if len(o.Algorithms) == 0 {
		v.add(p+".algorithms", "is empty, so no token could be accepted; remove it for the default (every asymmetric algorithm) or list e.g. [RS256, ES256]")
	}
	for i, alg := range o.Algorithms {
		ap := fmt.Sprintf("%s.algorithms[%d]", p, i)
		switch {
		case slices.Contains(allowedAlgorithms, alg):
		case strings.EqualFold(alg, "none"):
			v.add(ap, `"none" means unsigned tokens, which anyone can forge; remove it`)
		case strings.HasPrefix(strings.ToUpper(alg), "HS"):
			v.add(ap, fmt.Sprintf("%q is a shared-secret algorithm, which a resource server cannot verify safely (the gateway holds only the issuer's public keys); use the issuer's asymmetric algorithm, e.g. RS256 or ES256", alg))
		default:
			msg := fmt.Sprintf("%q is not a supported signature algorithm; use one of %s", alg, strings.Join(allowedAlgorithms, ", "))
			if s := strictyaml.Closest(alg, allowedAlgorithms); s != "" {
				msg = fmt.Sprintf("%q is not a supported signature algorithm; did you mean %q?", alg, s)
			}
			v.add(ap, msg)
		}
	}
	if o.Leeway < 0 || o.Leeway.D() > 5*time.Minute {
		v.add(p+".leeway", fmt.Sprintf("%s is outside 0 to 5m; clocks synchronised by NTP need a few seconds: remove it for the default (%s) or set e.g. 1m", o.Leeway, DefaultLeeway))
	}
	if strings.TrimSpace(o.GroupsClaim) == "" || strings.HasPrefix(o.GroupsClaim, ".") || strings.HasSuffix(o.GroupsClaim, ".") || strings.Contains(o.GroupsClaim, "..") {
		v.add(p+".groups_claim", fmt.Sprintf("%q is not a claim name or dotted path; write e.g. groups or realm_access.roles", o.GroupsClaim))
	}
}

// secureURL checks an absolute URL that must be https except on a
// loopback host (a local test issuer), and reports whether it is valid.
func (v *validator) secureURL(p, raw, example string) bool {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(p, fmt.Sprintf("%q is not an absolute http(s) URL; write e.g. %s", raw, example))
		return false
	}
	if u.Fragment != "" {
		v.add(p, fmt.Sprintf("%q has a #fragment, which is never sent to a server; remove it", raw))
		return false
	}
	if u.Scheme == "http" && !IsLoopbackHost(u.Hostname()) {
		v.add(p, fmt.Sprintf("%q is plain http, so keys and metadata could be tampered with in transit; use https (http is accepted only for a loopback host)", raw))
		return false
	}
	return true
}

// scopes checks OAuth scope tokens (RFC 6749 section 3.3: printable ASCII
// without space, " or \).
func (v *validator) scopes(p string, list []string) {
	for i, s := range list {
		ok := s != ""
		for _, r := range s {
			if r <= 0x20 || r >= 0x7f || r == '"' || r == '\\' {
				ok = false
			}
		}
		if !ok {
			v.add(fmt.Sprintf("%s[%d]", p, i), fmt.Sprintf("%q is not a scope: a scope is printable ASCII without spaces, quotes or backslashes; write e.g. mcp:tools", s))
		}
	}
}

func (v *validator) admin() {
	a := v.cfg.Admin
	if a == nil {
		return
	}
	if a.Listen == "" {
		v.add("admin.listen", "is not set; give the admin listener an address such as 127.0.0.1:9091, or remove admin:")
		return
	}
	if v.address("admin.listen", a.Listen, "127.0.0.1:9091") && a.Listen == v.cfg.Listen && !strings.HasSuffix(a.Listen, ":0") {
		v.add("admin.listen", fmt.Sprintf("%q is also the MCP listen address; the admin endpoints need their own listener, e.g. 127.0.0.1:9091", a.Listen))
	}
	for i, h := range a.AllowedHosts {
		if !validHostName(h) {
			v.add(fmt.Sprintf("admin.allowed_hosts[%d]", i), fmt.Sprintf("%q is not a DNS name; give a name alone, without scheme, port or path, e.g. mcpgw-admin.monitoring.svc (IP addresses need no entry)", h))
		}
	}
	if a.TokenFile != "" && strings.TrimSpace(a.TokenFile) != a.TokenFile {
		v.add("admin.token_file", fmt.Sprintf("%q has surrounding whitespace; remove it", a.TokenFile))
	}
	if a.ProtectMetrics && a.TokenFile == "" {
		v.add("admin.protect_metrics", "needs admin.token_file, the token /metrics would require; add it, or remove protect_metrics")
	}
}

// validHostName reports whether h is a DNS name as a Host header gives it
// (letters, digits, '-', '_' and dots; a trailing dot allowed), not an IP
// address.
func validHostName(h string) bool {
	name := strings.TrimSuffix(h, ".")
	if name == "" || len(name) > 253 || net.ParseIP(name) != nil {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

func (v *validator) sessions() {
	s := v.cfg.Sessions
	if s == nil {
		return
	}
	if s.IdleTimeout < 0 {
		v.add("sessions.idle_timeout", "must not be negative; set e.g. 30m, or remove it")
	}
	if s.DetachedTimeout < 0 {
		v.add("sessions.detached_timeout", "must not be negative; set e.g. 5m, or remove it for the default (2m)")
	}
	if s.MaxTasks < 0 {
		v.add("sessions.max_tasks", "must not be negative; set e.g. 10000, or remove it for the default")
	}
	if s.AdvertiseURL != "" {
		u, err := url.Parse(s.AdvertiseURL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.add("sessions.advertise_url", fmt.Sprintf("%q is not an http(s) URL; give the base URL the other replicas reach this one at, e.g. http://10.0.0.5:8080", s.AdvertiseURL))
		case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
			v.add("sessions.advertise_url", fmt.Sprintf("%q has a path, query or fragment; give only scheme, host and port (routes are added to it), e.g. http://10.0.0.5:8080", s.AdvertiseURL))
		}
		if s.KeyFile == "" {
			v.add("sessions.advertise_url", "needs sessions.key_file, the key the replicas share to trust each other's requestStates; add it, or remove advertise_url")
		}
	}
	if r := s.Replay; r != nil {
		if r.SessionEvents < 1 {
			v.add("sessions.replay.session_events", fmt.Sprintf("is %d; keep at least 1 event per session (default %d), or remove it", r.SessionEvents, DefaultReplaySessionEvents))
		}
		if r.SessionBytes < 1 {
			v.add("sessions.replay.session_bytes", fmt.Sprintf("is %d; keep at least 1 byte per session (default %d, 4 MiB), or remove it", r.SessionBytes, DefaultReplaySessionBytes))
		}
		if r.TotalBytes < 1 {
			v.add("sessions.replay.total_bytes", fmt.Sprintf("is %d; the process needs a positive bound (default %d, 256 MiB), or remove it", r.TotalBytes, DefaultReplayTotalBytes))
		} else if r.SessionBytes > r.TotalBytes {
			v.add("sessions.replay.session_bytes", fmt.Sprintf("is %d, more than total_bytes (%d), the bound for all sessions together; lower it or raise total_bytes", r.SessionBytes, r.TotalBytes))
		}
	}
	if s.Redis != nil {
		v.redis(s.Redis, s.KeyFile != "")
	}
}

// countSet counts the alternatives a section sets, for "exactly one of"
// checks.
func countSet(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

// redis checks sessions.redis.
func (v *validator) redis(r *Redis, keyRing bool) {
	const p = "sessions.redis"
	n := countSet(r.Addr != "", r.URL != "", len(r.Addrs) > 0)
	switch {
	case n == 0:
		v.add(p, "says nowhere where Redis is; set addr (e.g. 127.0.0.1:6379), url (redis://host:6379/0) or addrs (Sentinel or Cluster), or remove redis:")
	case n > 1:
		v.add(p, "sets more than one of addr, url and addrs; keep one")
	}
	if r.Addr != "" {
		v.address(p+".addr", r.Addr, "127.0.0.1:6379")
	}
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			v.add(p+".url", fmt.Sprintf("%q is not a redis:// or rediss:// URL; write e.g. redis://127.0.0.1:6379/0", redactURL(r.URL)))
		} else if _, set := u.User.Password(); set {
			v.add(p+".url", "carries a password; put it in password_file instead, so it stays out of the config")
		}
		if r.Cluster {
			v.add(p+".cluster", "does not go with url; give the Cluster seeds as addr or addrs")
		}
	}
	for i, a := range r.Addrs {
		v.address(fmt.Sprintf("%s.addrs[%d]", p, i), a, "10.0.0.5:26379")
	}
	if r.MasterName != "" && len(r.Addrs) == 0 {
		v.add(p+".master_name", "needs addrs, the Sentinel addresses; add them, or remove master_name")
	}
	if r.MasterName != "" && r.Cluster {
		v.add(p+".cluster", "does not go with master_name (Sentinel); keep one")
	}
	if r.DialTimeout < 0 {
		v.add(p+".dial_timeout", "must not be negative; set e.g. 2s, or remove it for the default")
	}
	if r.ReadTimeout < 0 {
		v.add(p+".read_timeout", "must not be negative; set e.g. 500ms, or remove it for the default")
	}
	if r.Queue < 0 {
		v.add(p+".queue", fmt.Sprintf("must not be negative; set e.g. %d, or remove it for the default", DefaultRedisQueue))
	}
	if strings.ContainsAny(r.KeyPrefix, " \t\r\n") {
		v.add(p+".key_prefix", fmt.Sprintf("%q has white space; use e.g. %q", r.KeyPrefix, DefaultRedisKeyPrefix))
	}
	if !keyRing {
		v.add(p, "needs sessions.key_file: replicas sharing Redis must share the key ring that seals session ids; add it, or remove redis:")
	}
}

// address checks a host:port listen or dial address and reports whether it
// is valid.
func (v *validator) address(p, addr, example string) bool {
	if addr == "" {
		v.add(p, fmt.Sprintf("is empty; set host:port, e.g. %s", example))
		return false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		reason := err.Error()
		if ae, ok := err.(*net.AddrError); ok {
			reason = ae.Err
		}
		v.add(p, fmt.Sprintf("%q is not host:port (%s); write e.g. %s", addr, reason, example))
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add(p, fmt.Sprintf("%q has port %q, which is not a number from 0 to 65535; write e.g. %s", addr, port, example))
		return false
	}
	if strings.ContainsFunc(host, isSpace) || strings.ContainsAny(host, "/") {
		v.add(p, fmt.Sprintf("%q has host %q, which is not a hostname or IP address; write e.g. %s", addr, host, example))
		return false
	}
	return true
}

// httpURL checks an absolute http(s) URL.
func (v *validator) httpURL(p, raw, example string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(p, fmt.Sprintf("%q is not an absolute http(s) URL; write e.g. %s", raw, example))
		return
	}
	if u.Fragment != "" {
		v.add(p, fmt.Sprintf("%q has a #fragment, which is never sent to a server; remove it", raw))
	}
}

// RouteUpstreams returns the sorted names of the upstreams route r exposes:
// those it lists, or every upstream when it lists none.
func (c *Config) RouteUpstreams(r *Route) []string {
	if r == nil || len(r.Upstreams) == 0 {
		return slices.Sorted(maps.Keys(c.Upstreams))
	}
	names := slices.Clone(r.Upstreams)
	slices.Sort(names)
	return slices.Compact(names)
}

// Summary describes a valid config in one line, for `mcpgw validate` and the
// startup log.
func (c *Config) Summary() string {
	names := slices.Sorted(maps.Keys(c.Upstreams))
	ups := make([]string, len(names))
	for i, n := range names {
		kind := "?"
		if u := c.Upstreams[n]; u != nil && u.Transport != "" {
			kind = u.Transport
		}
		ups[i] = n + ": " + kind
	}
	paths := make([]string, 0, len(c.Routes))
	for _, r := range c.Routes {
		if r != nil {
			paths = append(paths, r.Path)
		}
	}
	return fmt.Sprintf("config ok: %s (%s), %s (%s), listen %s",
		plural(len(ups), "upstream"), strings.Join(ups, ", "),
		plural(len(paths), "route"), strings.Join(paths, ", "),
		c.Listen)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// validName reports whether s matches ^[A-Za-z0-9][A-Za-z0-9_.-]*$.
func validName(s string) bool {
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '_' && r != '.' && r != '-') {
			return false
		}
	}
	return s != ""
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85 || r == 0xA0
}

// inheritEnv checks the names of upstreams.<name>.inherit_env: variable
// names, or a prefix ending in "*" (NPM_CONFIG_*; "*" alone is every
// variable of the gateway, which takes back the protection).
func (v *validator) inheritEnv(p string, names []string) {
	for i, n := range names {
		name, _ := strings.CutSuffix(n, "*")
		ok := n == "*" || name != ""
		for j := 0; ok && j < len(name); j++ {
			c := name[j]
			ok = c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || j > 0 && c >= '0' && c <= '9'
		}
		if !ok {
			v.add(fmt.Sprintf("%s[%d]", p, i), fmt.Sprintf("%q is not a variable name; use a name of letters, digits and _ (e.g. NODE_EXTRA_CA_CERTS), or a prefix ending in * (e.g. NPM_CONFIG_*)", n))
		}
	}
}
