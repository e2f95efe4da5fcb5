// Command clientdriver makes mcpgw the client under test of the official MCP
// conformance suite's client scenarios (`conformance client --command ...`).
//
// The suite starts a scenario server and runs this command with the
// server's URL as its last argument and the scenario in the environment
// (MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION and, for some,
// MCP_CONFORMANCE_CONTEXT). The driver writes a gateway config whose only
// upstream is that URL (with client-credentials OAuth for the auth/*
// scenarios), starts the mcpgw binary on a free loopback port, and then, as
// a downstream client of the gateway, exercises everything the gateway
// offers: it lists the tools, resources and prompts and calls, reads and
// gets each, answering elicitation with the requested schema's defaults.
// Everything the scenario server observes — the handshake, per-request
// _meta, headers, SSE reconnection, OAuth discovery and token requests — is
// the gateway's own upstream-side behaviour; the driver only makes the
// downstream traffic that causes it.
//
// Usage:
//
//	clientdriver -mcpgw PATH [-downstream VERSION] URL
//
// The driver speaks 2025-11-25 to the gateway by default, whatever the
// scenario's revision: to a 2026-07-28 scenario server the gateway then has
// to produce every 2026-07-28 client behaviour itself (per-request _meta,
// Mcp-Method/Mcp-Name/Mcp-Param-* headers, input_required rounds answered
// through the caller's session) instead of passing on a 2026-07-28 caller's.
// -downstream 2026-07-28 makes the driver a 2026-07-28 client itself (it
// then mirrors x-mcp-header arguments too), to exercise the other path.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

const upstreamName = "conformance"

// scenarioContext is MCP_CONFORMANCE_CONTEXT: what some scenarios hand the
// client (pre-registered OAuth credentials, the tool calls to make).
type scenarioContext struct {
	ClientID     string     `json:"client_id"`
	ClientSecret string     `json:"client_secret"`
	Issuer       string     `json:"issuer"`
	ToolCalls    []toolCall `json:"toolCalls"`
	// PrivateKeyPEM is the client's key for private_key_jwt
	// (auth/client-credentials-jwt): the driver writes it to a file, as an
	// operator would mount it.
	PrivateKeyPEM string `json:"private_key_pem"`
	// ValidJWT is the workload identity token (auth/wif-jwt-bearer): the
	// driver writes it to a file, as Kubernetes projects one.
	ValidJWT string `json:"valid_jwt"`
	// The enterprise IdP of auth/enterprise-managed-authorization: the
	// user's ID token there and where to exchange it.
	IDPIDToken       string `json:"idp_id_token"`
	IDPIssuer        string `json:"idp_issuer"`
	IDPClientID      string `json:"idp_client_id"`
	IDPTokenEndpoint string `json:"idp_token_endpoint"`
}

func main() {
	bin := flag.String("mcpgw", "", "the mcpgw `BINARY` to run (required)")
	down := flag.String("downstream", string(mcp.Version20251125), "protocol `VERSION` the driver speaks to the gateway")
	upAuth := flag.String("upstream-auth", authPerUser, "how the gateway authorizes at an auth/* scenario's server: `MODE` "+authClientCredentials+" (upstreams.NAME.oauth) or "+authPerUser+" (upstreams.NAME.auth.per_user: the driver follows the gateway's authorization links as the user's browser)")
	flag.Parse()
	logger := log.New(os.Stderr, "clientdriver: ", log.Lmicroseconds)
	if *bin == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: clientdriver -mcpgw BINARY [-downstream VERSION] URL (the conformance suite appends URL)")
		os.Exit(2)
	}
	sc := scenario{
		name:     os.Getenv("MCP_CONFORMANCE_SCENARIO"),
		version:  os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION"),
		upstream: flag.Arg(0),
	}
	switch *upAuth {
	case authClientCredentials, authPerUser:
		sc.perUser = *upAuth == authPerUser
	default:
		fmt.Fprintf(os.Stderr, "clientdriver: -upstream-auth %q: use %s or %s\n", *upAuth, authClientCredentials, authPerUser)
		os.Exit(2)
	}
	if sc.version == "" {
		sc.version = string(mcp.Version20251125)
	}
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &sc.ctx); err != nil {
			logger.Fatalf("MCP_CONFORMANCE_CONTEXT is not the JSON object expected: %v", err)
		}
	}
	if err := run(*bin, sc, *down, logger); err != nil {
		logger.Printf("scenario %s: %v", sc.name, err)
		os.Exit(1)
	}
}

// The -upstream-auth modes.
const (
	authClientCredentials = "client_credentials"
	authPerUser           = "per_user"
)

type scenario struct {
	name     string
	version  string
	upstream string
	ctx      scenarioContext
	// perUser: an auth/* scenario's server is authorized per user
	// (pu is set for it by run).
	perUser bool
	pu      *perUser
	// keyFile and assertionFile hold the scenario's client key and
	// workload identity token, when it gives them (written by run).
	keyFile, assertionFile string
	// ent: the enterprise IdP stand-in of an Enterprise-Managed
	// Authorization run (set by run).
	ent *enterprise
}

// usesPerUser reports whether this run authorizes per user.
// The client-credentials scenarios check the gateway's own grant, so they
// keep upstreams.NAME.oauth.
func (sc scenario) usesPerUser() bool {
	return sc.perUser && strings.HasPrefix(sc.name, "auth/") && !strings.HasPrefix(sc.name, "auth/client-credentials-") && sc.name != "auth/wif-jwt-bearer" && !sc.enterpriseScenario()
}

// config is the gateway config for the scenario: one upstream, one
// unprefixed route, an admin listener for /readyz.
func (sc scenario) config() string {
	var b strings.Builder
	switch {
	case sc.ent != nil:
		b.WriteString(sc.ent.globals())
	case sc.usesPerUser():
		b.WriteString(sc.pu.globals())
	default:
		b.WriteString("listen: 127.0.0.1:0\n")
	}
	fmt.Fprintf(&b, "admin:\n  listen: 127.0.0.1:0\nupstreams:\n  %s:\n    url: %q\n    timeout: 20s\n    startup_timeout: 15s\n", upstreamName, sc.upstream)
	if stateless(sc.version) {
		// The scenario server speaks 2026-07-28 only: say so, as an
		// operator would, rather than let the gateway probe it with
		// initialize for its legacy callers.
		b.WriteString("    protocol: \"2026\"\n")
	}
	if sc.ent != nil {
		b.WriteString(sc.enterpriseAuth())
	} else if sc.usesPerUser() {
		b.WriteString(sc.upstreamAuth())
	} else if strings.HasPrefix(sc.name, "auth/") {
		// The gateway's own credentials (OAuth client credentials): the
		// scenario's pre-registered ones when it gives them, else a fixed
		// pair (the suite's authorization servers accept any client). The
		// endpoints are discovered: from the issuer the scenario names, or
		// from the upstream's protected-resource metadata.
		id, secret := sc.ctx.ClientID, sc.ctx.ClientSecret
		if id == "" {
			id, secret = "mcpgw-conformance", "mcpgw-conformance-secret"
		}
		switch {
		case sc.keyFile != "":
			// private_key_jwt: the key, no secret.
			fmt.Fprintf(&b, "    oauth:\n      client_id: %q\n      private_key_file: %q\n", id, sc.keyFile)
		case sc.assertionFile != "":
			// The workload identity token, no secret.
			fmt.Fprintf(&b, "    oauth:\n      client_id: %q\n      assertion_file: %q\n", id, sc.assertionFile)
		default:
			fmt.Fprintf(&b, "    oauth:\n      client_id: %q\n      client_secret: %q\n", id, secret)
		}
		if sc.ctx.Issuer != "" {
			fmt.Fprintf(&b, "      issuer: %q\n", sc.ctx.Issuer)
		} else {
			// The suite's servers are on loopback, which URLs an
			// upstream names may reach only when allowed.
			b.WriteString("      discover: true\n      allow_addresses: [127.0.0.0/8, \"::1\"]\n")
		}
	}
	fmt.Fprintf(&b, "routes:\n  - path: /mcp\n    upstreams: [%s]\n    prefix: false\n", upstreamName)
	return b.String()
}

func run(bin string, sc scenario, downVersion string, logger *log.Logger) error {
	dir, err := os.MkdirTemp("", "mcpgw-clientdriver-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	cfgPath := filepath.Join(dir, "mcpgw.yaml")
	if sc.ctx.PrivateKeyPEM != "" {
		sc.keyFile = filepath.Join(dir, "client-key.pem")
		if err := os.WriteFile(sc.keyFile, []byte(sc.ctx.PrivateKeyPEM), 0o600); err != nil {
			return err
		}
	}
	if sc.enterpriseScenario() {
		if sc.ent, err = startEnterprise(sc); err != nil {
			return err
		}
		defer sc.ent.srv.Close()
	}
	if sc.ctx.ValidJWT != "" {
		sc.assertionFile = filepath.Join(dir, "workload-token")
		if err := os.WriteFile(sc.assertionFile, []byte(sc.ctx.ValidJWT), 0o600); err != nil {
			return err
		}
	}
	var gw *gateway
	// A per-user run's listen address is chosen before mcpgw starts
	// (public_url names it), so another process of the suite's parallel
	// scenarios may take the port first: mcpgw then exits before serving,
	// and the run picks another port, a few times.
	for attempt := 1; ; attempt++ {
		if sc.usesPerUser() {
			if sc.pu, err = newPerUser(dir); err != nil {
				return err
			}
		}
		if err := os.WriteFile(cfgPath, []byte(sc.config()), 0o600); err != nil {
			return err
		}
		logger.Printf("scenario %s (protocol %s), upstream %s, downstream %s; config:\n%s", sc.name, sc.version, sc.upstream, downVersion, sc.config())
		gw, err = startGateway(ctx, bin, cfgPath, logger)
		if err == nil {
			break
		}
		if !sc.usesPerUser() || attempt == 3 || !errors.Is(err, errExitedEarly) {
			return err
		}
		logger.Printf("scenario %s: %v; trying another port", sc.name, err)
	}
	defer gw.stop(logger)

	state, uerr := gw.waitUpstream(ctx)
	logger.Printf("upstream %s is %s %s", upstreamName, state, uerr)

	d := &downstream{
		url:     gw.mcpURL,
		version: downVersion,
		hc:      &http.Client{Timeout: 20 * time.Second},
		caps:    json.RawMessage(`{"elicitation":{"form":{}},"sampling":{}}`),
		answer:  answer,
		logf:    logger.Printf,
	}
	if sc.ent != nil {
		d.bearer = sc.ctx.IDPIDToken // the user's enterprise sign-in
	}
	if sc.usesPerUser() {
		d.bearer, d.authorize = driverKey, browser(logger.Printf)
		d.caps = json.RawMessage(`{"elicitation":{"form":{},"url":{}},"sampling":{}}`)
		d.answer = answerURL(ctx, d.authorize, answer)
	}
	derr := exercise(ctx, d, sc, logger)
	if state != "ready" {
		return errors.Join(fmt.Errorf("upstream never became ready (%s): %s", state, uerr), derr)
	}
	return derr
}

// exercise is the downstream traffic: everything the gateway offers, once.
func exercise(ctx context.Context, d *downstream, sc scenario, logger *log.Logger) error {
	if err := d.open(ctx); err != nil {
		return err
	}
	var errs []error
	// A per-user upstream's capabilities are known only once the caller
	// has authorized (the gateway has no connection of its own to it), so
	// its tools are asked for regardless.
	if d.capability("tools") || sc.usesPerUser() || sc.ent != nil {
		tools, err := listAll(ctx, d, mcp.MethodToolsList, "tools")
		errs = append(errs, err)
		d.schemas = map[string]json.RawMessage{}
		for _, t := range tools {
			var def struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			}
			if json.Unmarshal(t, &def) == nil {
				d.schemas[def.Name] = def.InputSchema
			}
		}
		calls := sc.ctx.ToolCalls
		if len(calls) == 0 {
			for _, t := range tools {
				var def struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"inputSchema"`
				}
				_ = json.Unmarshal(t, &def)
				calls = append(calls, toolCall{def.Name, argumentsFor(def.InputSchema)})
			}
		}
		echoSchema(tools, calls)
		for _, c := range calls {
			res, err := d.call(ctx, mcp.MethodToolsCall, map[string]any{"name": c.Name, "arguments": c.Arguments})
			logger.Printf("tools/call %s: %s %v", c.Name, clip(res), err)
			errs = append(errs, err)
		}
	}
	if d.capability("resources") {
		resources, err := listAll(ctx, d, mcp.MethodResourcesList, "resources")
		errs = append(errs, err)
		for _, r := range resources {
			var def struct {
				URI string `json:"uri"`
			}
			_ = json.Unmarshal(r, &def)
			res, err := d.call(ctx, mcp.MethodResourcesRead, map[string]any{"uri": def.URI})
			logger.Printf("resources/read %s: %s %v", def.URI, clip(res), err)
			errs = append(errs, err)
		}
	}
	if d.capability("prompts") {
		prompts, err := listAll(ctx, d, mcp.MethodPromptsList, "prompts")
		errs = append(errs, err)
		for _, p := range prompts {
			var def struct {
				Name      string `json:"name"`
				Arguments []struct {
					Name     string `json:"name"`
					Required bool   `json:"required"`
				} `json:"arguments"`
			}
			_ = json.Unmarshal(p, &def)
			args := map[string]string{}
			for _, a := range def.Arguments {
				if a.Required {
					args[a.Name] = "conformance"
				}
			}
			res, err := d.call(ctx, mcp.MethodPromptsGet, map[string]any{"name": def.Name, "arguments": args})
			logger.Printf("prompts/get %s: %s %v", def.Name, clip(res), err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// toolCall is one tools/call the driver makes.
type toolCall = struct {
	Name      string                     `json:"name"`
	Arguments map[string]json.RawMessage `json:"arguments"`
}

// echoSchema gives a json_schema_echo tool (json-schema-2020-12-preservation)
// what that scenario asks a client to send: the other tool's inputSchema
// exactly as the client received it, so the scenario sees whether the
// gateway kept every keyword.
func echoSchema(tools []json.RawMessage, calls []toolCall) {
	var focal json.RawMessage
	for _, t := range tools {
		var def struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if json.Unmarshal(t, &def) == nil && def.Name != "json_schema_echo" && focal == nil {
			focal = def.InputSchema
		}
	}
	for i := range calls {
		if calls[i].Name == "json_schema_echo" && focal != nil {
			calls[i].Arguments = map[string]json.RawMessage{"schema": focal}
		}
	}
}

// listAll walks every page of a list method.
func listAll(ctx context.Context, d *downstream, method, key string) ([]json.RawMessage, error) {
	var all []json.RawMessage
	cursor := ""
	for page := 0; page < 100; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		res, err := d.call(ctx, method, params)
		if err != nil {
			return all, err
		}
		var r map[string]json.RawMessage
		if err := json.Unmarshal(res, &r); err != nil {
			return all, fmt.Errorf("%s: %v", method, err)
		}
		var items []json.RawMessage
		_ = json.Unmarshal(r[key], &items)
		all = append(all, items...)
		next := ""
		_ = json.Unmarshal(r["nextCursor"], &next)
		if next == "" {
			return all, nil
		}
		cursor = next
	}
	return all, fmt.Errorf("%s: more than 100 pages", method)
}

// argumentsFor fills a tool's required arguments with a value of each one's type.
func argumentsFor(schema json.RawMessage) map[string]json.RawMessage {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]json.RawMessage{}
	for _, name := range s.Required {
		args[name] = valueFor(s.Properties[name])
	}
	return args
}

// valueFor is the schema's default, else a value of its type.
func valueFor(prop json.RawMessage) json.RawMessage {
	var p struct {
		Type    any             `json:"type"`
		Default json.RawMessage `json:"default"`
		Enum    []any           `json:"enum"`
	}
	_ = json.Unmarshal(prop, &p)
	if p.Default != nil {
		return p.Default
	}
	if len(p.Enum) > 0 {
		b, _ := json.Marshal(p.Enum[0])
		return b
	}
	switch p.Type {
	case "number", "integer":
		return json.RawMessage(`1`)
	case "boolean":
		return json.RawMessage(`true`)
	case "object":
		return json.RawMessage(`{}`)
	case "array":
		return json.RawMessage(`[]`)
	case "null":
		return json.RawMessage(`null`)
	}
	return json.RawMessage(`"conformance"`)
}

// answer handles what the gateway relays from the upstream: elicitation is
// accepted with the requested schema's defaults (SEP-1034: what a client
// shows pre-filled and the user submits unchanged), sampling gets a fixed
// reply.
func answer(method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case mcp.MethodElicitationCreate:
		var p struct {
			RequestedSchema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"requestedSchema"`
		}
		_ = json.Unmarshal(params, &p)
		content := map[string]json.RawMessage{}
		for name, prop := range p.RequestedSchema.Properties {
			content[name] = valueFor(prop)
		}
		return json.Marshal(map[string]any{"action": "accept", "content": content})
	case mcp.MethodSamplingCreateMessage:
		return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"conformance"},"model":"conformance-driver","stopReason":"endTurn"}`), nil
	case mcp.MethodRootsList:
		return json.RawMessage(`{"roots":[]}`), nil
	}
	return nil, fmt.Errorf("%w: %s", errNoAnswer, method)
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// errExitedEarly: mcpgw ended before naming its URLs (its log says why).
var errExitedEarly = errors.New("mcpgw exited before serving")

// gateway is a running mcpgw child.
type gateway struct {
	cmd      *exec.Cmd
	mcpURL   string
	adminURL string
	exited   chan struct{}
}

// startGateway runs mcpgw in its own process group, forwards its log to
// stderr, and returns once it names its MCP and admin URLs.
func startGateway(ctx context.Context, bin, cfgPath string, logger *log.Logger) (*gateway, error) {
	cmd := exec.Command(bin, "run", "-c", cfgPath, "--log-format", "json", "--log-level", "debug", "--drain-timeout", "1s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	g := &gateway{cmd: cmd, exited: make(chan struct{})}
	urls := make(chan [2]string, 4)
	logged := make(chan struct{}) // the log read to its end: Wait closes the pipe, so it waits for this
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			fmt.Fprintf(os.Stderr, "mcpgw: %s\n", line)
			var l struct {
				Msg string `json:"msg"`
				URL string `json:"url"`
			}
			if json.Unmarshal(line, &l) == nil && l.URL != "" {
				select {
				case urls <- [2]string{l.Msg, l.URL}:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-logged // the last lines say why it exited
		_ = cmd.Wait()
		close(g.exited)
	}()
	for g.mcpURL == "" || g.adminURL == "" {
		select {
		case u := <-urls:
			switch u[0] {
			case "serving MCP":
				g.mcpURL = u[1]
			case "serving admin endpoints":
				g.adminURL = u[1]
			}
		case <-g.exited:
			return nil, fmt.Errorf("%w: %v", errExitedEarly, cmd.ProcessState)
		case <-ctx.Done():
			g.stop(logger)
			return nil, errors.New("mcpgw did not start serving in time")
		}
	}
	return g, nil
}

// waitUpstream polls /readyz until the upstream is ready. A failed
// connection is retried by the gateway with backoff, so "down" is waited
// out too (a loaded machine can make a first attempt time out), up to
// upstreamPatience — except for a refusal that cannot change: mcpgw
// declining the scenario's OAuth metadata or authorization server, which
// is what several auth/* scenarios expect of it.
func (g *gateway) waitUpstream(ctx context.Context) (state, lastErr string) {
	deadline := time.Now().Add(upstreamPatience)
	for {
		resp, err := http.Get(g.adminURL + "/readyz")
		if err == nil {
			var r struct {
				Upstreams map[string]struct {
					State string `json:"state"`
					Error string `json:"error"`
				} `json:"upstreams"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			u := r.Upstreams[upstreamName]
			state, lastErr = u.State, u.Error
			final := (strings.Contains(u.Error, "OAuth discovery failed") || strings.Contains(u.Error, "cannot obtain an access token")) &&
				!strings.Contains(u.Error, "deadline exceeded") && !strings.Contains(u.Error, "timeout")
			if u.State == "ready" || (u.State != "" && u.State != "starting" && (final || time.Now().After(deadline))) {
				return state, lastErr
			}
		}
		select {
		case <-ctx.Done():
			return state, lastErr
		case <-g.exited:
			return "exited", ""
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// upstreamPatience is how long a failing upstream connection is waited for.
const upstreamPatience = 12 * time.Second

// stop ends the gateway (SIGTERM, then SIGKILL for its whole group).
func (g *gateway) stop(logger *log.Logger) {
	pid := g.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(5 * time.Second):
		logger.Printf("mcpgw did not stop on SIGTERM; killing it")
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-g.exited
	}
}
