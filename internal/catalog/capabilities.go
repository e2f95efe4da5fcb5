package catalog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Honest capabilities. A route offers what its upstreams offer: the union
// of the capabilities each declared on its latest connection that got
// ready (kept while it is down, so a restart does not make a route's
// offer flicker). An upstream that has never been ready (still starting,
// or hung) may bring any list when it arrives, and the gateway can answer
// every list itself, so it counts as offering tools, prompts and
// resources — but nothing that would fail at the gateway until it is up
// (subscriptions, completions, logging). Every list offered carries
// listChanged: the gateway announces upstreams coming and going, whatever
// each upstream says of its own lists.
//
// Capabilities are computed when asked (initialize, server/discover), so
// each new session or discover sees the upstream set as it is then. A
// legacy session's capabilities cannot change after initialize; what
// changes later reaches it as list_changed.

// capabilityOffer is what one upstream contributes to its route's offer.
type capabilityOffer struct {
	tools, prompts, resources, subscribe, completions, logging bool
}

// offer reads a capabilities object (nil: not known yet).
func offer(caps json.RawMessage) capabilityOffer {
	if caps == nil {
		return capabilityOffer{tools: true, prompts: true, resources: true}
	}
	has := func(path ...string) bool { return mcp.ServerCapability{Path: path}.In(caps) }
	return capabilityOffer{
		tools:       has("tools"),
		prompts:     has("prompts"),
		resources:   has("resources"),
		subscribe:   has("resources", "subscribe"),
		completions: has("completions"),
		logging:     has("logging"),
	}
}

// HasStateful reports whether an upstream of the route is stateful (one
// upstream session per downstream session).
func (v *View) HasStateful() bool {
	for _, name := range v.names {
		if v.ups[name].Stateful() {
			return true
		}
	}
	return false
}

// AwaitStarting waits for the route's upstreams still making their first
// connection, each until its startup_list_wait (counted from when it began
// starting, so the waits overlap rather than add up), so that a handshake
// answer made next offers what they offer.
func (v *View) AwaitStarting(ctx context.Context) {
	for _, name := range v.names {
		v.ups[name].AwaitStart(ctx)
	}
}

// Shown says which of a route's upstreams a caller may see anything of
// (core asks the policy: policy.Policy.MaySeeUnder); nil shows them all.
// What the route says of itself to that caller — capabilities,
// instructions — is made of those upstreams only: an upstream the caller
// may see nothing of must not show through them.
type Shown func(upstream string) bool

func (s Shown) has(upstream string) bool { return s == nil || s(upstream) }

// Namespace is the start every name of kind from upstream has in the
// canonical form policy judges (Canonical): "<upstream><separator>" for a
// tool or prompt, "<upstream>+" for a resource, "" on an unprefixed route.
func (v *View) Namespace(upstream string, kind mcp.Kind) string {
	sep := v.canonicalSep(kind)
	if sep == "" {
		return ""
	}
	return upstream + sep
}

// Capabilities is the capabilities object the route offers to a caller
// who is shown the upstreams shown lets through (without the tasks part:
// WithTaskCapabilities adds it).
func (v *View) Capabilities(shown Shown) json.RawMessage {
	var o capabilityOffer
	var skills, directoryRead bool
	for _, name := range v.names {
		if !shown.has(name) {
			continue
		}
		u := v.ups[name]
		caps := u.Capabilities()
		s, dr := skillOffer(caps) // skills.go
		skills, directoryRead = skills || s, directoryRead || dr
		uo := offer(caps)
		o.tools = o.tools || uo.tools
		o.prompts = o.prompts || uo.prompts
		o.resources = o.resources || uo.resources || uo.subscribe
		o.subscribe = o.subscribe || uo.subscribe
		o.completions = o.completions || uo.completions
		o.logging = o.logging || uo.logging
	}
	out := json.RawMessage(`{}`)
	set := func(key, value string) {
		if b, err := rawjson.Set(out, key, json.RawMessage(value)); err == nil {
			out = b
		}
	}
	if o.tools {
		set("tools", `{"listChanged":true}`)
	}
	if o.prompts {
		set("prompts", `{"listChanged":true}`)
	}
	switch {
	case o.subscribe:
		set("resources", `{"subscribe":true,"listChanged":true}`)
	case o.resources:
		set("resources", `{"listChanged":true}`)
	}
	if o.completions {
		set("completions", `{}`)
	}
	if o.logging {
		set("logging", `{}`)
	}
	return withSkills(out, skills, directoryRead)
}

// lacks is the refusal of a request that needs a capability its upstream
// did not declare: -32601, naming the upstream and the capability in the
// message and in data, so that a client of a merged route can tell which
// upstream lacks what (the upstream's own -32601 names neither).
func lacks(upstream string, c mcp.ServerCapability) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"upstream": upstream, "capability": c.Name()})
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeMethodNotFound,
		Message: fmt.Sprintf("upstream %q does not support %s (its capabilities have no %s)", upstream, c.What, c.Name()),
		Data:    data,
	}
}

// capabilityGap refuses method when the connection's declared
// capabilities (caps) lack what it needs (mcp.RequiredServerCapability).
func capabilityGap(upstream, method string, caps json.RawMessage) *jsonrpc.Error {
	need, ok := mcp.RequiredServerCapability(method)
	if !ok || need.In(caps) {
		return nil
	}
	return lacks(upstream, need)
}
