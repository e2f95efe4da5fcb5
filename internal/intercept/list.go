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
	desc, _ := rawjson.Get(def, "description")
	var text []byte
	if len(desc) > 1 && desc[0] == '"' {
		text = rawjson.AppendUnquoted(nil, desc[1:len(desc)-1])
	}
	for _, it := range s.byPhase[config.PhaseList] {
		if !it.applies(t) {
			continue
		}
		start := s.opts.Now()
		outcome, reason := Allowed, ""
		switch it.cfg.Type {
		case config.InterceptDescriptionScan:
			if why := suspicious(text, it.cfg.MaxDescriptionBytes); why != "" {
				outcome, reason = Flagged, why
				if it.cfg.Action == config.ScanHide {
					outcome = Hidden
				}
			}
		case config.InterceptDenyMatch:
			if it.m.matches(text) {
				outcome, reason = Hidden, "description matches a pattern the operator refuses"
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

// List runs the list phase over a list result: definitions it hides are
// left out of their array; everything else stays as it was. upstream
// names the upstream of a listed name (for match.upstreams).
func (s *Set) List(ctx context.Context, t Target, result []byte, upstream func(kind, name string) string) Outcome {
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
			if upstream != nil {
				it.Upstream = upstream(a.kind, name)
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
