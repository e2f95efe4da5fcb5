package intercept

import (
	"context"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// listArrays are the members of a list result holding definitions, and
// the kind of what they hold.
var listArrays = [...]struct{ key, kind string }{
	{"tools", "tool"}, {"prompts", "prompt"}, {"resources", "resource"}, {"resourceTemplates", "resource"},
}

// Hides reports whether the list phase hides the definition def of t
// (and why): the list leaves it out, and the core refuses a call of it as
// of a name not listed, so that what a caller can call (and what pinning
// judges) is what it was shown.
func (s *Set) Hides(ctx context.Context, t *Target, def []byte) (bool, string) {
	if !s.Has(config.PhaseList) {
		return false, ""
	}
	texts, tooDeep := definitionTexts(def)
	for _, it := range s.byPhase[config.PhaseList] {
		if !it.applies(t) {
			continue
		}
		start := s.opts.Now()
		outcome, reason := Allowed, ""
		switch it.cfg.Type {
		case config.InterceptDescriptionScan:
			for _, x := range texts {
				if why := suspicious(x.text, it.cfg.MaxDescriptionBytes); why != "" {
					outcome, reason = Flagged, x.where+strings.TrimPrefix(why, "description")
					break
				}
			}
			if outcome == Allowed && tooDeep {
				outcome, reason = Flagged, tooDeepReason
			}
			if outcome == Flagged && it.cfg.Action == config.ScanHide {
				outcome = Hidden
			}
		case config.InterceptDenyMatch:
			for _, x := range texts {
				if it.m.matches(x.text) {
					outcome, reason = Hidden, x.where+" matches a pattern the operator refuses"
					break
				}
			}
			if outcome == Allowed && tooDeep {
				outcome, reason = Hidden, tooDeepReason // fail closed: the rest was not judged
			}
		}
		s.record(it, config.PhaseList, outcome, start)
		switch outcome {
		case Flagged:
			s.opts.Logger.Warn("suspicious definition listed (description_scan flags it; action: hide would drop it)",
				zap.String("interceptor", it.cfg.Name), zap.String("route", t.Route), zap.String("name", t.Name), zap.String("reason", reason))
		case Hidden:
			return true, it.cfg.Name + ": " + reason
		}
	}
	return false, ""
}

// maxSchemaDepth bounds how deeply nested an input schema's properties
// the list phase follows: far beyond any real tool's, and a bound on the
// walk's recursion.
const maxSchemaDepth = 32

const tooDeepReason = "inputSchema is nested deeper than 32 levels, so its descriptions cannot all be judged"

// listedText is one text of a definition the list phase judges, decoded,
// and where it is ("description", "inputSchema.properties.path.description").
type listedText struct {
	where string
	text  []byte
}

// definitionTexts returns the texts of a definition a model reads and a
// poisoner hides instructions in: its description and title, and the
// descriptions and titles of its input schema and of the schema's
// properties and items at any depth up to maxSchemaDepth (tooDeep: the
// schema goes deeper, and was not read whole). Members are read in place
// (nothing is re-encoded) and matched ignoring case, each duplicate on its
// own, since a client may read the one a scan of the first would miss.
func definitionTexts(def []byte) (texts []listedText, tooDeep bool) {
	_ = rawjson.EachField(def, func(f rawjson.Field) bool {
		switch {
		case strings.EqualFold(f.Key, "description"), strings.EqualFold(f.Key, "title"):
			texts = appendText(texts, strings.ToLower(f.Key), f.Value)
		case strings.EqualFold(f.Key, "inputSchema"):
			texts, tooDeep = schemaTexts(texts, "inputSchema", f.Value, 0)
		}
		return true
	})
	return texts, tooDeep
}

// schemaTexts appends the texts of the JSON schema schema, at path, to
// texts (see definitionTexts).
func schemaTexts(texts []listedText, path string, schema []byte, depth int) ([]listedText, bool) {
	if len(schema) == 0 || schema[0] != '{' {
		return texts, false
	}
	if depth > maxSchemaDepth {
		return texts, true
	}
	deep := false
	_ = rawjson.EachField(schema, func(f rawjson.Field) bool {
		var d bool
		switch {
		case strings.EqualFold(f.Key, "description"), strings.EqualFold(f.Key, "title"):
			texts = appendText(texts, path+"."+strings.ToLower(f.Key), f.Value)
		case strings.EqualFold(f.Key, "items"):
			texts, d = schemaTexts(texts, path+".items", f.Value, depth+1)
		case strings.EqualFold(f.Key, "properties") && len(f.Value) > 0 && f.Value[0] == '{':
			_ = rawjson.EachField(f.Value, func(p rawjson.Field) bool {
				var pd bool
				texts, pd = schemaTexts(texts, path+".properties."+p.Key, p.Value, depth+1)
				d = d || pd
				return true
			})
		}
		deep = deep || d
		return true
	})
	return texts, deep
}

// appendText appends raw, decoded, when it is a JSON string.
func appendText(texts []listedText, where string, raw []byte) []listedText {
	if len(raw) < 2 || raw[0] != '"' {
		return texts
	}
	return append(texts, listedText{where: where, text: rawjson.AppendUnquoted(nil, raw[1:len(raw)-1])})
}

// List runs the list phase over a list result: definitions it hides are
// left out of their array; everything else stays as it was. resolve
// returns the upstream of a listed name (for match.upstreams) and the
// name to judge it as: the canonical one the call path judges (a tool a
// route renames keeps its upstream's name for the interceptors' match).
func (s *Set) List(ctx context.Context, t Target, result []byte, resolve func(kind, name string) (upstream, judged string)) Outcome {
	o := Outcome{Out: result}
	if !s.Has(config.PhaseList) {
		return o
	}
	for _, a := range listArrays {
		arr, ok := rawjson.Get(o.Out, a.key)
		if !ok {
			continue
		}
		elems, err := rawjson.Elements(arr)
		if err != nil {
			continue // not a list: the client's problem, not a definition to judge
		}
		kept := elems[:0:0]
		for _, el := range elems {
			name, _ := rawjson.GetString(el, "name")
			if a.kind == "resource" {
				if uri, ok := rawjson.GetString(el, "uri"); ok {
					name = uri
				} else if tmpl, ok := rawjson.GetString(el, "uriTemplate"); ok {
					name = tmpl
				}
			}
			it := t
			it.Kind, it.Name = a.kind, name
			if resolve != nil {
				it.Upstream, it.Name = resolve(a.kind, name)
			}
			if hide, why := s.Hides(ctx, &it, el); hide {
				o.Notes = append(o.Notes, strings.TrimSpace(name+" hidden by "+why))
				continue
			}
			kept = append(kept, el)
		}
		if len(kept) == len(elems) {
			continue
		}
		out, err := rawjson.Set(o.Out, a.key, rawjson.AppendArray(nil, kept))
		if err != nil {
			continue
		}
		o.Out, o.Changed = out, true
	}
	return o
}
