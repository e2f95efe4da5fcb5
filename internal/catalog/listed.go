package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// What a caller is shown is what it may call. On a route that hides
// anything (a policy, pinning), a tool or prompt the route does not list
// for the caller must be answered exactly like one the policy hides, so
// that a caller cannot tell them apart; and pinning must judge the
// definition the call will run against. Both need the definition as the
// connection that serves the call lists it: the shared one's (cached,
// schemas.go), or for an upstream that acts for each caller (exchanged or
// per-user credentials) or a stateful upstream's session, the caller's own
// connection's, which may list other tools than the shared one or none.

// ToolDefs looks up tool definitions for one caller, as the connections
// that serve its calls list them. A caller's own connection is listed at
// most once per ToolDefs (a list filter asks about every item): make one
// per request.
type ToolDefs struct {
	v   *View
	mu  sync.Mutex // own, and one walk at a time
	own map[*client.Client]map[string]json.RawMessage
}

// ToolDefs returns a lookup of tool definitions for one request.
func (v *View) ToolDefs() *ToolDefs { return &ToolDefs{v: v} }

// Lookup returns the upstream a routed tool name (as policy judges it:
// canonical or pinned) goes to and its definition as the caller's
// connection to it lists it. found is false when the route has no such
// tool for the caller (nothing resolves the name, or its upstream does not
// list it). jerr is set when that cannot be known — the upstream is down,
// its list failed, the caller has no credential for it yet (the -32042
// link to get one) — and then nothing may be assumed: fail closed.
func (d *ToolDefs) Lookup(ctx context.Context, name string) (upstream string, def json.RawMessage, found bool, jerr *jsonrpc.Error) {
	v := d.v
	r, ok, rerr := v.resolve(ctx, mcp.KindTool, name, true, nil)
	if rerr != nil || !ok {
		return "", nil, false, nil
	}
	u := v.ups[r.upstream]
	if !u.ownToolLists(ctx) {
		def, ok, err := u.sharedToolDef(ctx, r.internal)
		if err != nil {
			return r.upstream, nil, false, notListable(ctx, u, err)
		}
		return r.upstream, def, ok, nil
	}
	c, err := u.ClientFor(host.CallOnly(ctx, mcp.MethodToolsCall), true)
	if err != nil {
		return r.upstream, nil, false, notListable(ctx, u, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	byName, ok := d.own[c]
	if !ok {
		if byName, err = walkTools(ctx, c); err != nil {
			return r.upstream, nil, false, notListable(ctx, u, err)
		}
		if d.own == nil {
			d.own = map[*client.Client]map[string]json.RawMessage{}
		}
		d.own[c] = byName
	}
	def, ok = byName[r.internal]
	return r.upstream, def, ok, nil
}

// ownToolLists reports whether the caller in ctx is served by a connection
// of its own whose tools may differ from the shared connection's: an
// upstream that acts for its callers, or a stateful upstream's session.
func (u *upstreamState) ownToolLists(ctx context.Context) bool {
	return u.ActsForCaller() || (u.Config().Stateful && host.CallerOf(ctx).Session != "")
}

// HasPrompt reports whether the route lists prompt name (canonical or
// pinned) for the caller: as the shared connection's index has it, or as
// the caller's own connection lists it (a stateful or acting-for upstream,
// listed on each call: its prompts are not indexed). jerr is set when the
// upstream's prompts could not be listed.
func (v *View) HasPrompt(ctx context.Context, name string) (found bool, jerr *jsonrpc.Error) {
	r, ok, rerr := v.resolve(ctx, mcp.KindPrompt, name, true, nil)
	if rerr != nil || !ok {
		return false, nil
	}
	u := v.ups[r.upstream]
	if u.ownToolLists(ctx) {
		c, err := u.ClientFor(host.CallOnly(ctx, mcp.MethodPromptsGet), true)
		if err != nil {
			return false, notListable(ctx, u, err)
		}
		byName, err := walkNamed(ctx, c, Prompts)
		if err != nil {
			return false, notListable(ctx, u, err)
		}
		_, found = byName[r.internal]
		return found, nil
	}
	l := u.listing(ctx, Prompts, true)
	if l == nil {
		_, err := u.Client(ctx)
		if err == nil {
			err = errors.New("its prompts/list did not complete")
		}
		return false, notListable(ctx, u, err)
	}
	return l.set[r.internal], nil
}

// notListable is the answer when what an upstream lists cannot be known:
// the caller went away, needs a credential first, or the upstream is
// unavailable. It says the same whatever name was asked for. Why the list
// failed is the upstream's text (an HTTP body, a child's stderr): it goes
// to the log under the request id, as upstreamFailure's does (errors.go).
func notListable(ctx context.Context, u *upstreamState, err error) *jsonrpc.Error {
	if gerr := connectError(ctx, u.Name(), err); gerr != nil { // errors.go
		return gerr
	}
	id := requestID(ctx)
	u.Logger().Warn("the upstream's list could not be had to check a request against it; its caller was told only the request id",
		zap.String("request_id", id), zap.Error(err))
	return &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: fmt.Sprintf(
		"upstream %q: the gateway could not list what it offers, so it cannot check the request against it (request id %s; the gateway's log has the cause); retry when the upstream is available", u.Name(), id)}
}

// Unknown is the answer for a tool, prompt or resource the route does not
// show the caller, whether nothing has it, its upstream does not list it
// or the policy or pinning hides it: one answer for all, so that a caller
// learns nothing about what it may not see. external is the name as the
// request carries it (pinned); a resource is named by its URI without the
// explicit form's upstream, as an unresolved one is.
func (v *View) Unknown(kind mcp.Kind, external string) *jsonrpc.Error {
	if kind == mcp.KindResource {
		if r, ok, _ := v.resolve(context.Background(), kind, external, false, nil); ok {
			external = r.internal
		}
	}
	return v.unknown(kind, external)
}
