package mcp

import "github.com/mcpgw/mcpgw/internal/rawjson"

// Kind is what a routed request is about, in catalog and policy terms.
type Kind string

// The kinds of routed targets. The strings are the policy's kind names.
const (
	KindTool     Kind = "tool"
	KindPrompt   Kind = "prompt"
	KindResource Kind = "resource" // resource URIs and URI templates
	// KindTask is a task (tasks extension): its id is one the gateway
	// handed out, and the policy does not judge it — the tools/call that
	// created it was judged, and only its principal may use it.
	KindTask Kind = "task"
)

// Target says where a routed request's params keep the name (or URI) the
// gateway routes it by. It is the one table of which member each routed
// method names its target with: the catalog, the policy guard, the
// Mcp-Name header checks and the upstream client all read it here.
type Target struct {
	Kind Kind
	// Path is the member names from params to the string field.
	Path []string
}

// URI reports whether the target is a resource URI (or URI template).
func (t Target) URI() bool { return t.Kind == KindResource }

// Field is the target's path as written in error messages: "name", "ref.uri".
func (t Target) Field() string {
	s := ""
	for i, k := range t.Path {
		if i > 0 {
			s += "."
		}
		s += k
	}
	return s
}

var (
	targetToolName   = Target{KindTool, []string{"name"}}
	targetPromptName = Target{KindPrompt, []string{"name"}}
	targetURI        = Target{KindResource, []string{"uri"}}
	targetRefName    = Target{KindPrompt, []string{"ref", "name"}}
	targetRefURI     = Target{KindResource, []string{"ref", "uri"}}
	targetTaskID     = Target{KindTask, []string{"taskId"}}
)

// TargetOf returns where method's params name what it is routed by (the
// method table's target). completion/complete is routed by its ref: a
// prompt name or a resource template URI, so its target depends on
// params.ref.type.
func TargetOf(method string, params []byte) (Target, bool) {
	m := Method(method)
	if !m.refTarget {
		return m.target, m.target.Kind != ""
	}
	ref, ok := rawjson.Get(params, "ref")
	if !ok {
		return Target{}, false
	}
	switch typ, _ := rawjson.GetString(ref, "type"); typ {
	case "ref/prompt":
		return targetRefName, true
	case "ref/resource":
		return targetRefURI, true
	}
	return Target{}, false
}

// RoutedMethods returns the methods Routed reports, in table order.
func RoutedMethods() []string { return methodsWhere(MethodInfo.Routed) }

// Routed reports whether method is forwarded to the one upstream that owns
// its target.
func Routed(method string) bool { return Method(method).Routed() }

// NameHeaderField is the params member that the 2026-07-28 Mcp-Name header
// mirrors for method, or "" when the method has none.
func NameHeaderField(method string) string { return Method(method).NameHeader }
