package core

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// What the gateway answers itself, and how results are adapted to the
// caller's revision.

// Cache hints on stateless list results that the upstream did not give.
// The gateway announces every catalog change on subscriptions/listen, so a
// client may keep a list for a while; reads are never cached by default.
const (
	listTTL = 30 * time.Second
)

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// NegotiateInitialize reads initialize's params and picks the revision:
// the client's when mcpgw speaks it, else the latest (the spec's
// counter-offer).
func NegotiateInitialize(params json.RawMessage) (mcp.InitializeParams, mcp.Revision, *jsonrpc.Error) {
	var p mcp.InitializeParams
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == "" {
		return p, "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "initialize: params.protocolVersion is required")
	}
	version := p.ProtocolVersion
	if !version.Initializes() {
		version = mcp.LatestVersion
	}
	return p, version, nil
}

// InitializeResult is the InitializeResult of route rte at version. It
// waits for upstreams still starting (bounded by their startup_list_wait):
// a session keeps the capabilities and instructions of this answer for its
// whole life, and hosts initialize at once (mcpgw stdio's within 100 ms).
// Capabilities and instructions are those of the upstreams the caller (in
// ctx) may see anything of: one denied all of an upstream learns nothing
// of it here.
func (c *Core) InitializeResult(ctx context.Context, rte *Route, version mcp.Revision) json.RawMessage {
	rte.View.AwaitStarting(ctx)
	shown := shownTo(ctx, rte)
	res, _ := json.Marshal(mcp.InitializeResult{
		ProtocolVersion: version,
		// What the upstreams offer (catalog/capabilities.go), tasks too, as
		// far as the client's revision defines it.
		Capabilities: mcp.ServerCapabilitiesFor(rte.View.WithTaskCapabilities(rte.View.Capabilities(shown), false, shown), version),
		ServerInfo:   mustJSON(c.opts.ServerInfo),
		Instructions: rte.View.Instructions(shown),
	})
	return res
}

// Discover answers server/discover for a route, after waiting for
// upstreams still starting as InitializeResult does, showing the caller
// what InitializeResult would. Where what a caller sees depends on who
// asks (Generation.PrivateLists) the answer is cacheScope private: a
// shared cache must not hand one caller's answer to another.
func (c *Core) Discover(ctx context.Context, rte *Route) json.RawMessage {
	rte.View.AwaitStarting(ctx)
	shown := shownTo(ctx, rte)
	scope := "public"
	if rte.Gen.PrivateLists {
		scope = "private"
	}
	b, _ := json.Marshal(struct {
		ResultType        string          `json:"resultType"`
		TTLMs             int64           `json:"ttlMs"`
		CacheScope        string          `json:"cacheScope"`
		SupportedVersions []mcp.Revision  `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
		ServerInfo        any             `json:"serverInfo"`
		Instructions      string          `json:"instructions,omitempty"`
		Meta              map[string]any  `json:"_meta"`
	}{
		ResultType:        "complete",
		TTLMs:             listTTL.Milliseconds(),
		CacheScope:        scope,
		SupportedVersions: mcp.AllVersions,
		Capabilities:      rte.View.WithTaskCapabilities(rte.View.Capabilities(shown), true, shown), // the tasks extension when an upstream has it
		ServerInfo:        c.opts.ServerInfo,
		Instructions:      rte.View.Instructions(shown),
		Meta:              map[string]any{mcp.MetaServerInfo: c.opts.ServerInfo},
	})
	return b
}

// StatelessStatus is the HTTP status the 2026-07-28 transport assigns to
// an error code.
func StatelessStatus(code int) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest, jsonrpc.CodeParseError,
		mcp.CodeHeaderMismatch, mcp.CodeMissingRequiredClientCapability, mcp.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// StatelessResult adapts a response for a 2026-07-28 client: results carry
// resultType (session-revision upstreams omit it), cacheable results carry ttlMs and
// cacheScope, resource-not-found uses -32602, and the server identity in
// the per-hop _meta is the gateway's.
//
// One scan of the result's members finds what to change; the changes are
// byte-span edits (jsonrpc.Edit) applied where the answer is written, so a
// large result is neither rescanned nor copied here.
func (c *Core) StatelessResult(method string, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp.Error != nil {
		if resp.Error.Code == mcp.CodeResourceNotFound {
			e := *resp.Error
			e.Code = jsonrpc.CodeInvalidParams
			resp.Error = &e
		}
		return resp
	}
	resp.ApplyEdits() // edits of its own would have to be merged with these
	res := resp.Result
	var hasType, hasInputs, hasTTL, hasScope bool
	var metas []rawjson.Field
	members := 0
	see := func(name string, start, end int) {
		members++
		switch name {
		case "resultType":
			hasType = true
		case "inputRequests":
			hasInputs = true
		case "ttlMs":
			hasTTL = true
		case "cacheScope":
			hasScope = true
		case "_meta":
			metas = append(metas, rawjson.Field{Key: name, Value: res[start:end], Start: start, End: end})
		}
	}
	if err := eachMember(resp, see); err != nil {
		return resp // not an object: nothing to add to
	}
	var edits []jsonrpc.Edit
	// The client's server is the gateway: an upstream's identity in the
	// per-hop _meta is replaced by the gateway's (every occurrence, with
	// what the first becomes, as rawjson.Set does).
	if len(metas) > 0 {
		if _, has := rawjson.Get(metas[0].Value, mcp.MetaServerInfo); has {
			if m, err := rawjson.Set(metas[0].Value, mcp.MetaServerInfo, c.serverInfo); err == nil {
				for _, f := range metas {
					edits = append(edits, jsonrpc.Edit{Start: f.Start, End: f.End, With: m})
				}
			}
		}
	}
	// Members added go last, before the closing brace.
	var add []byte
	member := func(key, value string) {
		if members > 0 {
			add = append(add, ',')
		}
		members++
		add = append(add, '"')
		add = append(add, key...)
		add = append(add, `":`...)
		add = append(add, value...)
	}
	if !hasType {
		// An older upstream's result that carries input requests (an SDK's
		// multi-round-trip emulation does this on its second round) is an
		// input_required result, whatever it forgot to say.
		if hasInputs {
			member("resultType", `"input_required"`)
		} else {
			member("resultType", `"complete"`)
		}
	}
	if IsList(method) || method == mcp.MethodResourcesRead {
		ttl := listTTL.Milliseconds()
		if method == mcp.MethodResourcesRead {
			ttl = 0
		}
		if !hasTTL {
			member("ttlMs", jsonInt(ttl))
		}
		if !hasScope {
			member("cacheScope", `"public"`)
		}
	}
	if add != nil {
		end := bytes.LastIndexByte(res, '}')
		edits = append(edits, jsonrpc.Edit{Start: end, End: end, With: add})
	}
	resp.ResultEdits = edits
	return resp
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// sessionResult removes what only stateless results carry (resultType,
// and the cache hints ttlMs and cacheScope a 2026-07-28 upstream puts on
// its lists) from a result bound for a session revision's caller: each
// client sees its own revision's shape.
func sessionResult(sess *Session, resp *jsonrpc.Message) *jsonrpc.Message {
	if sess.Stateless() || resp.Error != nil {
		return resp
	}
	// One pass over the result's members tells whether there is anything
	// to remove (a merged list is megabytes; most results have neither).
	var statelessOnly []string
	var hopMeta bool
	_ = eachMember(resp, func(name string, start, end int) {
		switch name {
		case "resultType", "ttlMs", "cacheScope":
			statelessOnly = append(statelessOnly, name)
		case "_meta":
			hopMeta = bytes.Contains(resp.Result[start:end], []byte(mcp.HopPrefix))
		}
	})
	for _, name := range statelessOnly {
		if res, err := rawjson.Delete(resp.Result, name); err == nil {
			resp.Result = res
		}
	}
	// A 2026-07-28 upstream's per-hop keys (its serverInfo, say) describe
	// its hop; a session's server is the gateway, named at initialize.
	if hopMeta {
		if res, err := mcp.WithoutHopMeta(resp.Result); err == nil {
			resp.Result = res
		}
	}
	return resp
}

// eachMember calls fn with each member of resp's result: from what the
// parse of the upstream's answer recorded when it can (no scan of a large
// result), else from a scan.
func eachMember(resp *jsonrpc.Message, fn func(name string, start, end int)) error {
	if resp.ResultMembers(fn) {
		return nil
	}
	return rawjson.EachField(resp.Result, func(f rawjson.Field) bool {
		fn(f.Key, f.Start, f.End)
		return true
	})
}

// IsList reports whether method is one of the merged list methods.
func IsList(method string) bool {
	return mcp.Method(method).List != nil
}
