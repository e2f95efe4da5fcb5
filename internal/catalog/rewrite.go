package catalog

import (
	"bytes"
	"context"
	"fmt"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Naming what upstreams hand out, on prefixed routes: every name and URI a
// client is shown — list items, _meta.ui.resourceUri, resource links and
// embedded resources in tool results and prompt messages, the contents of
// a read — is in the route's naming, so the client can send it back. Each
// edit replaces one string member by byte span; nothing else is touched,
// and an array is re-joined only when one of its elements changed.

// uiResourceURIPaths are where MCP Apps put a tool's (or a tool result's)
// UI resource: _meta.ui.resourceUri, and the older flat key.
var uiResourceURIPaths = [][]string{{"_meta", "ui", "resourceUri"}, {"_meta", "ui/resourceUri"}}

// rewriteItem names one list item for the route. It reports false for an
// item that cannot be named (no string identifying field): it is left
// out, as policy filtering would.
func (v *View) rewriteItem(ctx context.Context, kind ListKind, upstream string, it []byte) ([]byte, bool) {
	id, ok := rawjson.GetString(it, kind.Field)
	if !ok {
		v.ups[upstream].Logger().Warn(kind.Method + " item without a string " + kind.Field + " left out")
		return nil, false
	}
	var name string
	switch kind.Key {
	case Resources.Key:
		name = v.displayURI(ctx, upstream, id, true)
	case ResourceTemplates.Key:
		name = v.displayTemplate(ctx, upstream, id, true)
	case Skills.Key:
		out, _, err := v.rewriteSkill(ctx, upstream, it) // skills.go
		return out, err == nil
	default:
		name = v.displayName(upstream, id)
	}
	out := it
	var err error
	if name != id {
		if out, err = rawjson.SetString(it, kind.Field, name); err != nil {
			return nil, false
		}
	}
	if kind.Key == Tools.Key {
		out = v.rewriteUIMeta(ctx, upstream, out)
	}
	return out, true
}

// rewriteUIMeta names the UI resource of an MCP Apps tool (or tool result).
func (v *View) rewriteUIMeta(ctx context.Context, upstream string, obj []byte) []byte {
	meta, ok := rawjson.Get(obj, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		return obj
	}
	// Most tools' _meta has neither: one pass to tell.
	has := false
	_ = rawjson.EachField(meta, func(f rawjson.Field) bool {
		has = f.Key == "ui" || f.Key == "ui/resourceUri"
		return !has
	})
	if !has {
		return obj
	}
	out := meta
	for _, path := range uiResourceURIPaths {
		if o, _, err := v.renamePath(ctx, upstream, out, path[1:]); err == nil {
			out = o
		}
	}
	if len(out) == len(meta) && string(out) == string(meta) {
		return obj
	}
	if o, err := rawjson.Set(obj, "_meta", out); err == nil {
		return o
	}
	return obj
}

// renamePath names the URI at path in obj, if there is one; it reports
// whether it changed anything.
func (v *View) renamePath(ctx context.Context, upstream string, obj []byte, path []string) ([]byte, bool, error) {
	uri, err := rawjson.GetPath(obj, path)
	if err != nil {
		return obj, false, nil // absent, or not a string: not a URI to name
	}
	name := v.displayURI(ctx, upstream, uri, true)
	if name == uri {
		return obj, false, nil
	}
	out, err := rawjson.SetPath(obj, path, name)
	if err != nil {
		return obj, false, err
	}
	return out, true, nil
}

// rewriteResult names the URIs of a routed request's result.
func (v *View) rewriteResult(ctx context.Context, method, upstream string, res []byte) ([]byte, error) {
	switch method { // skills.go
	case mcp.MethodSkillsGet:
		skill, ok := rawjson.Get(res, "skill")
		if !ok || len(skill) == 0 || skill[0] != '{' {
			return res, nil
		}
		out, changed, err := v.rewriteSkill(ctx, upstream, skill)
		if err != nil || !changed {
			return res, err
		}
		return rawjson.Set(res, "skill", out)
	case mcp.MethodResourcesDirectoryRead:
		out, _, err := editArray(res, "resources", func(it []byte) ([]byte, bool, error) {
			return v.renamePath(ctx, upstream, it, []string{"uri"})
		})
		return out, err
	}
	if method != mcp.MethodResourcesRead && !bytes.Contains(res, []byte("resource")) && !bytes.Contains(res, []byte(`\u`)) {
		// Nothing to name: every URI renamed in a call's or a prompt's
		// result sits in a resource_link or resource block or a
		// resourceUri member, and the one way to spell those without the
		// word is a \u escape.
		return res, nil
	}
	switch method {
	case mcp.MethodResourcesRead:
		out, _, err := editArray(res, "contents", func(it []byte) ([]byte, bool, error) {
			return v.renamePath(ctx, upstream, it, []string{"uri"})
		})
		return out, err
	case mcp.MethodToolsCall:
		out, _, err := editArray(res, "content", func(b []byte) ([]byte, bool, error) { return v.rewriteBlock(ctx, upstream, b) })
		if err != nil {
			return nil, err
		}
		return v.rewriteUIMeta(ctx, upstream, out), nil
	case mcp.MethodPromptsGet:
		out, _, err := editArray(res, "messages", func(msg []byte) ([]byte, bool, error) {
			content, ok := rawjson.Get(msg, "content")
			if !ok {
				return msg, false, nil
			}
			if len(content) > 0 && content[0] == '[' {
				return editArray(msg, "content", func(b []byte) ([]byte, bool, error) { return v.rewriteBlock(ctx, upstream, b) })
			}
			b, changed, err := v.rewriteBlock(ctx, upstream, content)
			if err != nil || !changed {
				return msg, false, err
			}
			out, err := rawjson.Set(msg, "content", b)
			return out, err == nil, err
		})
		return out, err
	}
	return res, nil
}

// rewriteBlock names the URI of a content block that refers to a
// resource: a resource_link's uri, an embedded resource's resource.uri.
func (v *View) rewriteBlock(ctx context.Context, upstream string, b []byte) ([]byte, bool, error) {
	switch typ, _ := rawjson.GetString(b, "type"); typ {
	case "resource_link":
		return v.renamePath(ctx, upstream, b, []string{"uri"})
	case "resource":
		return v.renamePath(ctx, upstream, b, []string{"resource", "uri"})
	}
	return b, false, nil
}

// editArray applies edit to each element of the array obj[key] and
// reports whether any changed; obj itself comes back when none did. An
// element edit fails only on JSON it cannot splice: that element is left
// as it was.
func editArray(obj []byte, key string, edit func([]byte) ([]byte, bool, error)) ([]byte, bool, error) {
	arr, ok := rawjson.Get(obj, key)
	if !ok || len(arr) == 0 || arr[0] != '[' {
		return obj, false, nil
	}
	items, err := rawjson.Elements(arr)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", key, err)
	}
	changed := false
	for i, it := range items {
		if out, c, err := edit(it); err == nil && c {
			items[i], changed = out, true
		}
	}
	if !changed {
		return obj, false, nil
	}
	out, err := rawjson.Set(obj, key, rawjson.AppendArray(nil, items))
	return out, err == nil, err
}
