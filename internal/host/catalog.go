package host

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// URISeparator joins an upstream name to a resource URI on prefixed routes:
// upstream "docs" exposing "file:///a.md" is seen as "docs+file:///a.md".
// The result is still an RFC 3986 URI (the scheme "docs+file" is legal when
// the upstream name uses letters, digits, '-' and '.'), the original URI is
// recovered by cutting at the first '+', and two upstreams exposing the same
// URI get two distinct names.
const URISeparator = "+"

// ListKind describes one of the four merged list methods.
type ListKind struct {
	Method     string // e.g. tools/list
	Key        string // the result's array key, e.g. "tools"
	Field      string // the item's identifying field, e.g. "name"
	URI        bool   // Field holds a URI (template), rewritten with URISeparator
	Capability string // the upstream capability that offers the list
}

// The merged lists.
var (
	Tools             = ListKind{mcp.MethodToolsList, "tools", "name", false, "tools"}
	Prompts           = ListKind{mcp.MethodPromptsList, "prompts", "name", false, "prompts"}
	Resources         = ListKind{mcp.MethodResourcesList, "resources", "uri", true, "resources"}
	ResourceTemplates = ListKind{mcp.MethodResourcesTemplatesList, "resourceTemplates", "uriTemplate", true, "resources"}
)

// View is the catalog one route exposes: a subset of the upstreams, with or
// without name prefixes.
//
// A View is a snapshot of the host's upstream set when it was made: after a
// reload the router makes new views, and calls already under way on an old
// one finish on the upstreams they started on.
type View struct {
	h        *Host
	ups      map[string]*Upstream
	names    []string // sorted
	sep      string
	prefixed bool
}

// View returns the catalog over the named upstreams (all when names is
// empty) of the current upstream set.
func (h *Host) View(names []string, prefixed bool) *View {
	set := h.current()
	if len(names) == 0 {
		names = set.names
	}
	v := &View{h: h, ups: map[string]*Upstream{}, sep: set.sep, prefixed: prefixed}
	for _, n := range names {
		if u := set.byName[n]; u != nil && v.ups[n] == nil {
			v.ups[n] = u
			v.names = append(v.names, n)
		}
	}
	slices.Sort(v.names)
	return v
}

// Upstreams returns the view's upstream names in catalog order.
func (v *View) Upstreams() []string { return slices.Clone(v.names) }

// Prefixed reports whether names carry the upstream prefix.
func (v *View) Prefixed() bool { return v.prefixed }

// cursor is the composite pagination cursor: which upstream to continue
// with and that upstream's own cursor. It is opaque to clients.
type cursor struct {
	Kind     string `json:"k"`
	Upstream string `json:"u"`
	Cursor   string `json:"c,omitempty"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(kind ListKind, s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.Kind != kind.Key || c.Upstream == "" {
		return c, errors.New("invalid cursor: pass back the nextCursor of the previous page unchanged")
	}
	return c, nil
}

// List answers one page of a merged list. Upstreams are visited in name
// order, one upstream page per downstream page, so that every upstream's own
// pagination is respected; an upstream that is down or offers no such list
// is skipped (its items are absent until it returns).
func (v *View) List(ctx context.Context, kind ListKind, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	start, upCursor := 0, ""
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	if s, ok := rawjson.GetString(params, "cursor"); ok {
		c, err := decodeCursor(kind, s)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err)
		}
		start = slices.Index(v.names, c.Upstream)
		if start < 0 {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid cursor: upstream %q is no longer on this route; start the list again without a cursor", c.Upstream)
		}
		upCursor = c.Cursor
	}
	for i := start; i < len(v.names); i, upCursor = i+1, "" {
		name := v.names[i]
		res, next, ok := v.listOne(ctx, kind, name, params, upCursor)
		if !ok {
			continue
		}
		var nextCursor string
		switch {
		case next != "":
			nextCursor = encodeCursor(cursor{Kind: kind.Key, Upstream: name, Cursor: next})
		default:
			if j := v.nextOffering(kind, i+1); j >= 0 {
				nextCursor = encodeCursor(cursor{Kind: kind.Key, Upstream: v.names[j]})
			}
		}
		if next == "" && nextCursor != "" && isEmptyArray(res, kind.Key) {
			continue // skip an empty upstream rather than return an empty page
		}
		out, err := finishPage(res, nextCursor)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream %q: %v", name, err)
		}
		return out, nil
	}
	return json.RawMessage(`{"` + kind.Key + `":[]}`), nil
}

// nextOffering returns the index of the first upstream from i on that is
// connected and offers kind, or -1.
func (v *View) nextOffering(kind ListKind, i int) int {
	for ; i < len(v.names); i++ {
		u := v.ups[v.names[i]]
		u.mu.Lock()
		c, starting := u.client, u.state == StateStarting
		u.mu.Unlock()
		// An upstream still making its first connection may offer the list:
		// the next page waits for it rather than end the list early.
		if starting || (c != nil && c.HasCapability(kind.Capability)) {
			return i
		}
	}
	return -1
}

// listOne fetches one page from one upstream and rewrites its items. It
// returns the result object, the upstream's nextCursor and whether the
// upstream contributed (false when it is down, offers no such list or failed).
func (v *View) listOne(ctx context.Context, kind ListKind, name string, params json.RawMessage, upCursor string) (json.RawMessage, string, bool) {
	u := v.ups[name]
	c, err := u.listClient(ctx)
	if err != nil {
		u.log.Debug("skipping unavailable upstream in "+kind.Method, zap.Error(err))
		return nil, "", false
	}
	if !c.HasCapability(kind.Capability) {
		return nil, "", false
	}
	p, err := rawjson.Delete(params, "cursor")
	if err == nil && upCursor != "" {
		p, err = rawjson.SetString(p, "cursor", upCursor)
	}
	if err != nil {
		return nil, "", false
	}
	resp, err := c.Call(ctx, kind.Method, p, client.CallOptions{})
	if err != nil {
		u.log.Warn(kind.Method+" failed; its items are left out of this page", zap.Error(err))
		return nil, "", false
	}
	if resp.Error != nil {
		u.log.Warn(kind.Method+" answered an error; its items are left out of this page",
			zap.Int("code", resp.Error.Code), zap.String("message", resp.Error.Message))
		return nil, "", false
	}
	next, _ := rawjson.GetString(resp.Result, "nextCursor")
	res := resp.Result
	if kind.Key == Tools.Key && !u.cfg.Stateful {
		// What clients are shown is what calls are checked against.
		u.schemas.observe(res)
	}
	if v.prefixed {
		res, err = v.rewriteItems(kind, name, res)
		if err != nil {
			u.log.Warn(kind.Method+" result unreadable; its items are left out", zap.Error(err))
			return nil, "", false
		}
	}
	return res, next, true
}

// rewriteItems prefixes each item's identifying field, leaving every other
// byte of the item as the upstream sent it.
func (v *View) rewriteItems(kind ListKind, upstream string, res json.RawMessage) (json.RawMessage, error) {
	arr, ok := rawjson.Get(res, kind.Key)
	if !ok {
		return res, nil
	}
	items, err := rawjson.Elements(arr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind.Key, err)
	}
	out := make([][]byte, 0, len(items))
	for _, it := range items {
		id, ok := rawjson.GetString(it, kind.Field)
		if !ok {
			return nil, fmt.Errorf("%s item without a string %q", kind.Key, kind.Field)
		}
		nit, err := rawjson.SetString(it, kind.Field, v.external(kind.URI, upstream, id))
		if err != nil {
			return nil, err
		}
		out = append(out, nit)
	}
	return rawjson.Set(res, kind.Key, rawjson.AppendArray(nil, out))
}

func isEmptyArray(obj json.RawMessage, key string) bool {
	arr, ok := rawjson.Get(obj, key)
	if !ok {
		return true
	}
	items, err := rawjson.Elements(arr)
	return err == nil && len(items) == 0
}

func finishPage(res json.RawMessage, nextCursor string) (json.RawMessage, error) {
	if nextCursor != "" {
		return rawjson.SetString(res, "nextCursor", nextCursor)
	}
	return rawjson.Delete(res, "nextCursor")
}

// External returns the downstream-facing name or URI for an upstream's one.
func (v *View) External(uri bool, upstream, id string) string { return v.external(uri, upstream, id) }

// external returns the downstream-facing name or URI for an upstream's one.
func (v *View) external(uri bool, upstream, id string) string {
	if !v.prefixed {
		return id
	}
	if uri {
		return upstream + URISeparator + id
	}
	return upstream + v.sep + id
}

// Resolve maps a downstream tool/prompt name (or, with uri, a resource URI)
// to its upstream and the upstream's own name for it.
func (v *View) Resolve(uri bool, external string) (upstream, internal string, ok bool) {
	if !v.prefixed {
		if len(v.names) != 1 {
			return "", "", false
		}
		return v.names[0], external, true
	}
	sep := v.sep
	if uri {
		sep = URISeparator
	}
	up, rest, found := strings.Cut(external, sep)
	if !found || rest == "" {
		return "", "", false
	}
	if _, ok := slices.BinarySearch(v.names, up); !ok {
		return "", "", false
	}
	return up, rest, true
}

// Forward routes a request to the upstream that owns the name or URI in its
// params, translating the name back, and returns the upstream's response
// with resource URIs translated forward. A gateway-side failure (unknown
// name, upstream down, timeout) is returned as a *jsonrpc.Error that names
// the upstream; the upstream's own errors come back inside the response.
func (v *View) Forward(ctx context.Context, method string, params json.RawMessage, opts client.CallOptions) (*jsonrpc.Message, *jsonrpc.Error) {
	t, ok := mcp.TargetOf(method, params)
	if !ok {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is not routed by mcpgw", method)
	}
	if t.Kind == mcp.KindTask {
		return v.forwardTask(ctx, method, params, opts) // tasks.go
	}
	external, err := rawjson.GetPath(params, t.Path)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: params.%s must be a string", method, t.Field())
	}
	upstream, internal, ok := v.Resolve(t.URI(), external)
	if !ok {
		return nil, v.unknown(t, external)
	}
	if internal != external {
		if params, err = rawjson.SetPath(params, t.Path, internal); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: %v", method, err)
		}
	}
	u := v.ups[upstream]
	if !u.enter() {
		u.m.Unavailable()
		return nil, &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %q was replaced or removed by a config reload while this request was routed; retry it", upstream)}
	}
	defer u.exit()
	c, cerr := u.ClientFor(callOnly(ctx, method), !opts.PassInputRequired)
	if cerr != nil {
		u.m.Unavailable()
		return nil, &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: cerr.Error()}
	}
	copts := u.callOptions(opts)
	if caps, ok := ctx.Value(callerCapsKey{}).(json.RawMessage); ok && c.Modern() && !opts.PassInputRequired {
		// An older caller of a stateless upstream: declare what it can do,
		// as its own initialize would have (roots as the gateway answers them).
		copts.Capabilities = json.RawMessage(u.viewCapabilities(caps))
	}
	tc, terr := v.beginTaskCall(ctx, method, upstream, params, &copts) // tasks.go: the task a tools/call may create
	if terr != nil {
		return nil, terr
	}
	defer tc.end()
	start := u.m.CallStarted()
	resp, cerr := c.Call(ctx, method, params, copts)
	if cerr == nil && c.Modern() && !opts.PassInputRequired {
		resp, cerr = v.fulfil(ctx, c, method, params, resp, copts)
	}
	u.m.CallDone(method, start, callReason(resp, cerr))
	if cerr != nil {
		return nil, callError(upstream, cerr)
	}
	tc.result(resp)
	if method == mcp.MethodResourcesRead && v.prefixed && resp.Error == nil {
		if res, err := v.rewriteContents(upstream, resp.Result); err == nil {
			resp.Result = res
		}
	}
	if resp.Error != nil && t.URI() && internal != external {
		v.rewriteErrorURI(resp.Error, internal, external)
	}
	return resp, nil
}

// callReason classifies a call's end for metrics: -1 for a result.
func callReason(resp *jsonrpc.Message, err error) int {
	var te *client.TimeoutError
	switch {
	case err == nil && resp != nil && resp.Error != nil:
		return metrics.ReasonErrorResponse
	case err == nil:
		return -1
	case errors.As(err, &te):
		return metrics.ReasonTimeout
	case errors.Is(err, context.Canceled):
		return metrics.ReasonCancelled
	}
	return metrics.ReasonTransport
}

// maxInputRounds bounds how many input_required rounds the gateway answers
// on a caller's behalf before giving up on an upstream that keeps asking.
const maxInputRounds = 8

// fulfil bridges a 2026-07-28 upstream's input_required results for a
// caller of an older revision: each input request becomes a server→client
// request on the caller's stream (opts.Request), and the original request is
// retried with the answers and the upstream's requestState, untouched.
func (v *View) fulfil(ctx context.Context, c *client.Client, method string, params json.RawMessage, resp *jsonrpc.Message, opts client.CallOptions) (*jsonrpc.Message, error) {
	for round := 0; ; round++ {
		if resp.Error != nil {
			return resp, nil
		}
		if rt, _ := rawjson.GetString(resp.Result, "resultType"); rt != "input_required" {
			return resp, nil
		}
		if opts.Request == nil || round == maxInputRounds {
			why := "the caller cannot receive server requests (it accepts no event stream)"
			if opts.Request != nil {
				why = fmt.Sprintf("the upstream still asked for input after %d rounds", maxInputRounds)
			}
			resp.Result, resp.Error = nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: the upstream needs input from the client, but %s", why)
			return resp, nil
		}
		requests, _ := rawjson.Get(resp.Result, "inputRequests")
		fields, _ := rawjson.Fields(requests)
		answers := []byte(`{}`)
		for _, f := range fields {
			m, _ := rawjson.GetString(f.Value, "method")
			p, _ := rawjson.Get(f.Value, "params")
			res, rerr := opts.Request(ctx, m, p)
			if rerr != nil {
				resp.Result, resp.Error = nil, jsonrpc.Errorf(rerr.Code, "mcpgw: the client did not answer the upstream's %s: %s", m, rerr.Message)
				return resp, nil
			}
			var err error
			if answers, err = rawjson.Set(answers, f.Key, res); err != nil {
				return nil, err
			}
		}
		retry, err := rawjson.Set(params, "inputResponses", answers)
		if err != nil {
			return nil, err
		}
		if state, ok := rawjson.Get(resp.Result, "requestState"); ok {
			retry, _ = rawjson.Set(retry, "requestState", state)
		} else {
			retry, _ = rawjson.Delete(retry, "requestState")
		}
		if resp, err = c.Call(ctx, method, retry, opts); err != nil {
			return nil, err
		}
	}
}

func (v *View) unknown(t mcp.Target, external string) *jsonrpc.Error {
	switch {
	case t.URI() && v.prefixed:
		return jsonrpc.Errorf(mcp.CodeResourceNotFound, "resource not found: %q; on this route resource URIs have the form <upstream>%s<uri> with upstream one of %v", external, URISeparator, v.names)
	case t.URI():
		return jsonrpc.Errorf(mcp.CodeResourceNotFound, "resource not found: %q", external)
	case v.prefixed:
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown %s %q: names on this route have the form <upstream>%s<name> with upstream one of %v", t.Kind, external, v.sep, v.names)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown %s %q", t.Kind, external)
}

// rewriteContents prefixes contents[].uri of a resources/read result.
func (v *View) rewriteContents(upstream string, res json.RawMessage) (json.RawMessage, error) {
	arr, ok := rawjson.Get(res, "contents")
	if !ok {
		return res, nil
	}
	items, err := rawjson.Elements(arr)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		if uri, ok := rawjson.GetString(it, "uri"); ok {
			if items[i], err = rawjson.SetString(it, "uri", v.external(true, upstream, uri)); err != nil {
				return nil, err
			}
		}
	}
	return rawjson.Set(res, "contents", rawjson.AppendArray(nil, items))
}

// rewriteErrorURI names the resource of an upstream's error (resource not
// found: data.uri, and the message) as the caller named it.
func (v *View) rewriteErrorURI(e *jsonrpc.Error, internal, external string) {
	if uri, ok := rawjson.GetString(e.Data, "uri"); ok && uri == internal {
		if d, err := rawjson.SetString(e.Data, "uri", external); err == nil {
			e.Data = d
		}
	}
	if !strings.Contains(e.Message, external) {
		e.Message = strings.ReplaceAll(e.Message, internal, external)
	}
}

// Each sends a request to every connected upstream of the view that offers
// capability, for settings the gateway fans out (logging/setLevel). Errors
// are logged, not returned: one upstream's refusal must not fail the rest.
// Only upstreams for which want returns true are asked; stateless upstreams
// never are (their settings travel in each request's _meta).
func (v *View) Each(ctx context.Context, capability, method string, params json.RawMessage, want func(upstream string) bool) {
	for _, name := range v.names {
		u := v.ups[name]
		if !want(name) {
			continue
		}
		// Settings come from sessions of older revisions: they go where
		// those sessions' calls go.
		c, err := u.ClientFor(ctx, true)
		if err != nil || c.Modern() || !c.HasCapability(capability) {
			continue
		}
		if resp, err := c.Call(ctx, method, params, client.CallOptions{}); err != nil || resp.Error != nil {
			u.log.Debug(method+" not accepted", zap.Error(err))
		}
	}
}

// Instructions merges the upstreams' instructions: an unprefixed route
// passes its upstream's through; a prefixed one labels each part.
func (v *View) Instructions() string {
	var parts []string
	for _, name := range v.names {
		u := v.ups[name]
		u.mu.Lock()
		c := u.client
		u.mu.Unlock()
		if c == nil || c.InitializeResult().Instructions == "" {
			continue
		}
		ins := c.InitializeResult().Instructions
		if !v.prefixed {
			return ins
		}
		parts = append(parts, fmt.Sprintf("## %s (tools prefixed %q)\n%s", name, name+v.sep, ins))
	}
	return strings.Join(parts, "\n\n")
}
