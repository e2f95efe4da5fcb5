package policy

import (
	"encoding/json"
	"fmt"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// listArrays maps a kind to the arrays of a list result that hold its
// items, and the member naming each item.
var listArrays = map[string][]struct{ array, name string }{
	KindTool:     {{"tools", "name"}},
	KindPrompt:   {{"prompts", "name"}},
	KindResource: {{"resources", "uri"}, {"resourceTemplates", "uriTemplate"}, {"skills", "uri"}}, // skills: SEP-2640
}

// FilterList returns a tools/list, prompts/list, resources/list or
// resources/templates/list result without the items p may not see on
// route (Decision.Listed is false). kind is KindTool, KindPrompt or
// KindResource (for both resource lists). result is the JSON-RPC result
// object (or, for recorded catalogs, a bare JSON array of items).
//
// Every byte outside the removed items is kept: other members (nextCursor,
// _meta, unknown fields) and each kept item are untouched; only when an
// item is removed is the array rewritten, as its kept items joined by ",".
// An item without a string name is removed (fail closed). An error means
// result is not a JSON object or array of that shape; refuse the response.
func (pol *Policy) FilterList(p Principal, route, kind string, result json.RawMessage) (json.RawMessage, error) {
	l := pol.Lister(p, route) // conditions not on the name: judged once
	return FilterListFunc(kind, result, func(k, name string, _ []byte) bool {
		return l.Decide(k, name).Listed()
	})
}

// FilterListFunc is FilterList with the decision made by keep, which is
// called with the item's kind, name (or URI, or URI template) and raw JSON.
// The router can combine the policy with pinning here.
func FilterListFunc(kind string, result json.RawMessage, keep func(kind, name string, item []byte) bool) (json.RawMessage, error) {
	arrays, ok := listArrays[kind]
	if !ok {
		return nil, fmt.Errorf("policy: %q is not a list kind (tool, prompt, resource)", kind)
	}
	if firstByte(result) == '[' {
		names := make([]string, len(arrays))
		for i, a := range arrays {
			names[i] = a.name
		}
		out, _, err := filterArray(kind, result, names, keep)
		return out, err
	}
	out := result
	for _, a := range arrays {
		raw, ok := rawjson.Get(out, a.array)
		if !ok {
			continue
		}
		filtered, changed, err := filterArray(kind, raw, []string{a.name}, keep)
		if err != nil {
			return nil, fmt.Errorf("policy: %s: %w", a.array, err)
		}
		if !changed {
			continue // nothing removed: keep the original bytes
		}
		if out, err = rawjson.Set(out, a.array, filtered); err != nil {
			return nil, err
		}
	}
	if _, err := rawjson.Fields(out); err != nil {
		return nil, fmt.Errorf("policy: list result: %w", err)
	}
	return out, nil
}

// filterArray filters a raw array of items, each named by the first of
// names it has as a string member. It returns arr itself when every item
// is kept.
func filterArray(kind string, arr []byte, names []string, keep func(kind, name string, item []byte) bool) ([]byte, bool, error) {
	items, err := rawjson.Elements(arr)
	if err != nil {
		return nil, false, err
	}
	kept := make([][]byte, 0, len(items))
	for _, it := range items {
		var name string
		var ok bool
		for _, n := range names {
			if name, ok = rawjson.GetString(it, n); ok {
				break
			}
		}
		if ok && keep(kind, name, it) {
			kept = append(kept, it)
		}
	}
	if len(kept) == len(items) {
		return arr, false, nil
	}
	return rawjson.AppendArray(nil, kept), true, nil
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}
