package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/toolsearch"
)

// Tool search (docs/protocol.md, "Tool search"). On a route in search
// mode (routes[].tools; auto above its threshold of tools the caller may
// see) tools/list shows the gateway's two tools and the route's always
// tools. <mcpgw>search_tools ranks the tools the caller may see — the
// same filter as tools/list (listFilter) — and <mcpgw>call_tool is
// unwrapped into the direct call it names before anything else reads the
// request (metaCall), so policy, pinning, rate limits, audit, streaming
// and bridging treat it exactly as that call. Direct calls keep working.

// The gateway's tools, named <config.MetaUpstream><separator><base>.
const (
	metaSearch = "search_tools"
	metaCall   = "call_tool"
)

// Search limits: results per search, by default and at most.
const (
	defaultSearchLimit = 5
	maxSearchLimit     = 20
	maxQueryBytes      = 1024
)

// metaTools are the definitions tools/list shows in search mode. Their
// bytes depend on the separator only, never on the catalog.
func metaTools(view *catalog.View) [][]byte {
	search, call := view.MetaToolName(metaSearch), view.MetaToolName(metaCall)
	// Names and separator are of config-validated characters; quoted as
	// JSON all the same, so that the definitions are valid whatever they hold.
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	inText := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	return [][]byte{
		fmt.Appendf(nil, `{"name":%s,"title":"Search tools","description":"Find the tools of this server for a task: describe what you want to do in a few words. Returns the best matches, best first, each with its name, description and inputSchema. Then call one with %s (or directly by its name).","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What you want to do, e.g. \"create a github issue\""},"upstream":{"type":"string","description":"Only tools of this upstream (the part of a tool name before %s)"},"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"Most tools to return (default %d)"}},"required":["query"],"additionalProperties":false},"annotations":{"readOnlyHint":true,"openWorldHint":false}}`,
			q(search), inText(call), inText(metaSep(view)), maxSearchLimit, defaultSearchLimit),
		fmt.Appendf(nil, `{"name":%s,"title":"Call a tool","description":"Call a tool that %s found, by its exact name, with arguments that match its inputSchema. Returns that tool's own result.","inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name, as %s returned it"},"arguments":{"type":"object","description":"The tool's arguments"}},"required":["name"],"additionalProperties":false}}`,
			q(call), inText(search), inText(search)),
	}
}

func metaSep(view *catalog.View) string {
	return strings.TrimPrefix(view.MetaToolName(""), config.MetaUpstream)
}

// searchRoute reports whether the route offers the meta-tools at all.
func searchRoute(view *catalog.View) bool {
	mode, _, _ := view.ToolsMode()
	return mode == config.ToolsSearch || mode == config.ToolsAuto
}

// searchMode reports whether tools/list on rte shows the meta-tools for
// the caller in ctx: always in search mode; in auto mode when the caller
// may see more tools than the threshold.
func (c *Core) searchMode(ctx context.Context, rte *Route) bool {
	mode, threshold, _ := rte.View.ToolsMode()
	switch mode {
	case config.ToolsSearch:
		return true
	case config.ToolsAuto:
		return rte.View.CountTools(ctx, threshold, c.toolFilter(ctx, rte)) > threshold
	}
	return false
}

// toolFilter is what tools/list lets the caller see, for one tool item.
func (c *Core) toolFilter(ctx context.Context, rte *Route) func(name string, item []byte) bool {
	keep := c.listFilter(ctx, rte, mcp.MethodToolsList)
	judge := rte.Gen.Intercept.Has(config.PhaseList)
	if keep == nil && !judge {
		return func(string, []byte) bool { return true }
	}
	return func(name string, item []byte) bool {
		if keep != nil && !keep(string(mcp.KindTool), name, item) {
			return false
		}
		// What the list phase hides is no hit: its call is refused as not
		// listed (item is the listed form, judged as interceptList does).
		return !judge || !listHides(ctx, rte, name, item)
	}
}

// searchList answers tools/list in search mode: the meta-tools, then the
// always tools the caller may see (filtered as any list is).
func (c *Core) searchList(ctx context.Context, rte *Route, sess *Session) (json.RawMessage, *jsonrpc.Error) {
	_, _, always := rte.View.ToolsMode()
	var items [][]byte
	for _, name := range always {
		if _, item, ok := rte.View.ListedTool(ctx, name); ok {
			items = append(items, item)
		}
	}
	res, _ := rawjson.Set([]byte(`{}`), "tools", rawjson.AppendArray(nil, items))
	res, jerr := c.filterList(ctx, rte, sess, mcp.MethodToolsList, res)
	if jerr != nil {
		return nil, jerr
	}
	if rte.Gen.Intercept != nil {
		res = c.interceptList(ctx, rte, res) // the always tools are judged as any list's
	}
	arr, _ := rawjson.Get(res, "tools")
	kept, _ := rawjson.Elements(arr)
	out, err := rawjson.Set(res, "tools", rawjson.AppendArray(nil, append(metaTools(rte.View), kept...)))
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: could not list the search tools: %v", err)
	}
	return out, nil
}

// metaName reports which of the gateway's tools a tools/call on rte names
// ("" for none): only search routes have them.
func metaName(rte *Route, msg *jsonrpc.Message) string {
	if msg.Method != mcp.MethodToolsCall || !searchRoute(rte.View) {
		return ""
	}
	name, _ := rawjson.GetString(msg.Params, "name")
	switch name {
	case rte.View.MetaToolName(metaSearch):
		return metaSearch
	case rte.View.MetaToolName(metaCall):
		return metaCall
	}
	return ""
}

// unwrapCall turns a call of <mcpgw>call_tool into the direct call it
// names: params.name and params.arguments become the inner ones, every
// other member (_meta with its progress token, task, inputResponses,
// requestState) stays. Other requests are returned as they are.
func unwrapCall(rte *Route, msg *jsonrpc.Message) (*jsonrpc.Message, *jsonrpc.Error) {
	if metaName(rte, msg) != metaCall {
		return msg, nil
	}
	callName := rte.View.MetaToolName(metaCall)
	args, _ := rawjson.Get(msg.Params, "arguments")
	fields, err := rawjson.Fields(args)
	if err != nil || len(args) == 0 || args[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments must be an object {\"name\": <tool>, \"arguments\": {...}}", callName)
	}
	var name string
	inner := json.RawMessage(`{}`)
	for _, f := range fields {
		switch f.Key {
		case "name":
			if json.Unmarshal(f.Value, &name) != nil || name == "" {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.name must be the name of a tool (a non-empty string); find one with %s", callName, rte.View.MetaToolName(metaSearch))
			}
		case "arguments":
			if len(f.Value) == 0 || (f.Value[0] != '{' && string(f.Value) != "null") {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.arguments must be an object holding the tool's arguments", callName)
			}
			if f.Value[0] == '{' {
				inner = f.Value
			}
		default:
			// One reading: nothing else may stand beside name and
			// arguments (a "Name" would be read differently elsewhere).
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: unknown argument %q; pass only name and arguments", callName, f.Key)
		}
	}
	if name == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: arguments.name is required: the name of the tool to call; find one with %s", callName, rte.View.MetaToolName(metaSearch))
	}
	if strings.HasPrefix(name, rte.View.MetaToolName("")) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s calls the route's tools, not the gateway's own; call %s directly", callName, name)
	}
	p, err := rawjson.SetString(msg.Params, "name", name)
	if err == nil {
		p, err = rawjson.Set(p, "arguments", inner)
	}
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: %v", callName, err)
	}
	out := *msg
	out.Params = p
	return &out, nil
}

// searchTools answers a call of <mcpgw>search_tools: the ranked tools the
// caller may see, as JSON in structuredContent and in a text block. Bad
// arguments are a tool error the model can read and correct.
func (c *Core) searchTools(ctx context.Context, rte *Route, msg *jsonrpc.Message) *jsonrpc.Message {
	name := rte.View.MetaToolName(metaSearch)
	var a struct {
		Query    *string `json:"query"`
		Upstream string  `json:"upstream"`
		Limit    *int    `json:"limit"`
	}
	args, ok := rawjson.Get(msg.Params, "arguments")
	if ok {
		if fs, err := rawjson.Fields(args); err == nil {
			for _, f := range fs {
				switch f.Key {
				case "query", "upstream", "limit":
				default:
					return toolError(msg.ID, fmt.Sprintf("%s: unknown argument %q; pass query, and optionally upstream and limit", name, f.Key))
				}
			}
		}
	}
	if !ok || json.Unmarshal(args, &a) != nil || a.Query == nil {
		return toolError(msg.ID, fmt.Sprintf(`%s: arguments must be {"query": "<what you want to do>"} with optionally "upstream" (a string) and "limit" (1 to %d)`, name, maxSearchLimit))
	}
	limit := defaultSearchLimit
	if a.Limit != nil {
		if *a.Limit < 1 || *a.Limit > maxSearchLimit {
			return toolError(msg.ID, fmt.Sprintf("%s: limit %d is out of range; use 1 to %d", name, *a.Limit, maxSearchLimit))
		}
		limit = *a.Limit
	}
	q := strings.TrimSpace(*a.Query)
	switch {
	case len(q) > maxQueryBytes:
		return toolError(msg.ID, fmt.Sprintf("%s: the query is %d bytes; describe the task in a few words (at most %d bytes)", name, len(q), maxQueryBytes))
	case len(toolsearch.Tokens(q)) == 0:
		return toolError(msg.ID, fmt.Sprintf("%s: the query has no words to search for; describe the task, e.g. \"read a file\"", name))
	}
	hits, jerr := rte.View.SearchTools(ctx, q, a.Upstream, limit, c.toolFilter(ctx, rte), shownTo(ctx, rte))
	if jerr != nil {
		return toolError(msg.ID, name+": "+jerr.Message)
	}
	tools := make([][]byte, 0, len(hits))
	for _, h := range hits {
		tools = append(tools, searchItem(h))
	}
	sc, _ := rawjson.Set([]byte(`{}`), "tools", rawjson.AppendArray(nil, tools))
	text, _ := json.Marshal(string(sc))
	res := fmt.Appendf(nil, `{"content":[{"type":"text","text":%s}],"structuredContent":%s}`, text, sc)
	return jsonrpc.NewResult(msg.ID, res)
}

// searchItem is what a search shows of a tool: its name and upstream, and
// its title, description, inputSchema and annotations as the route lists
// them (byte for byte).
func searchItem(h catalog.ToolHit) []byte {
	out, _ := rawjson.SetString([]byte(`{}`), "name", h.Name)
	out, _ = rawjson.SetString(out, "upstream", h.Upstream)
	for _, k := range []string{"title", "description", "inputSchema", "annotations"} {
		if v, ok := rawjson.Get(h.Item, k); ok {
			out, _ = rawjson.Set(out, k, v)
		}
	}
	return out
}

// toolError is a tools/call result that reports a failure to the model.
func toolError(id jsonrpc.ID, text string) *jsonrpc.Message {
	t, _ := json.Marshal(text)
	return jsonrpc.NewResult(id, fmt.Appendf(nil, `{"content":[{"type":"text","text":%s}],"isError":true}`, t))
}
