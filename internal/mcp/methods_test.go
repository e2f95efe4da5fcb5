package mcp

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// methodConstants reads mcp.go's Method* and Notification* constants: the
// methods the gateway knows by name, each of which must have a row.
func methodConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := goparser.ParseFile(token.NewFileSet(), "mcp.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Method") && !strings.HasPrefix(n.Name, "Notification") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s is not a string literal", n.Name)
				}
				v, _ := strconv.Unquote(lit.Value)
				out[n.Name] = v
			}
		}
	}
	if len(out) < 30 {
		t.Fatalf("found only %d method constants in mcp.go", len(out))
	}
	return out
}

// Every method the gateway names has a row, and every row has the facts
// its kind requires: a fact forgotten here would silently be false
// elsewhere (a routed method counted as "other", judged as no kind, …).
func TestMethodTableComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range methods {
		if seen[m.Name] {
			t.Errorf("%s: two rows", m.Name)
		}
		seen[m.Name] = true
	}
	for name, v := range methodConstants(t) {
		if !seen[v] {
			t.Errorf("%s (%q) has no row in the method table", name, v)
		}
	}
	policyKinds := map[Kind]bool{KindTool: true, KindPrompt: true, KindResource: true, KindTask: true}
	for _, m := range methods {
		name := m.Name
		if m.From == 0 {
			t.Errorf("%s: no sender", name)
		}
		request := !m.Notification
		if request && m.From == FromClient && !m.Label {
			t.Errorf("%s: a client request without a metric label would be counted as \"other\"", name)
		}
		if m.From == FromServer && request && m.ClientCapability == "" {
			t.Errorf("%s: a server→client request names no client capability it needs", name)
		}
		if m.Notification && strings.HasSuffix(name, "/list_changed") && m.From == FromServer && m.ListChanged == "" {
			t.Errorf("%s: a list_changed notification without the lists it announces", name)
		}
		if m.ListChanged != "" && (!m.Notification || len(ListsChangedBy(name)) == 0) {
			t.Errorf("%s: announces %q lists but is no notification or no list names it", name, m.ListChanged)
		}
		if m.Routed() {
			if !request || m.From != FromClient {
				t.Errorf("%s: routed but not a client request", name)
			}
			if !m.refTarget && (len(m.target.Path) == 0 || !policyKinds[m.target.Kind]) {
				t.Errorf("%s: routed without a target member or policy kind (%+v)", name, m.target)
			}
			if !m.Label {
				t.Errorf("%s: routed without a metric label", name)
			}
			if m.List != nil {
				t.Errorf("%s: routed and a merged list", name)
			}
		}
		if !m.Routed() {
			for fact, set := range map[string]bool{
				"NameHeader": m.NameHeader != "", "Capability": m.Capability != nil, "Audited": m.Audited,
				"Arguments": m.Arguments, "PerName": m.PerName, "Interactive": m.Interactive,
				"NotFoundInvalidParams": m.NotFoundInvalidParams,
			} {
				if set {
					t.Errorf("%s: %s applies to routed methods only", name, fact)
				}
			}
		}
		if m.NameHeader != "" && (m.refTarget || m.NameHeader != m.target.Field()) {
			t.Errorf("%s: Mcp-Name mirrors %q, the target is %q", name, m.NameHeader, m.target.Field())
		}
		if m.PerName && m.target.Kind != KindTool && m.target.Kind != KindPrompt && m.target.Kind != KindResource {
			t.Errorf("%s: counted per name without a tool, prompt or resource target", name)
		}
		if m.Arguments && m.target.Kind != KindTool && m.target.Kind != KindPrompt {
			t.Errorf("%s: arguments of a %q target", name, m.target.Kind)
		}
		if l := m.List; l != nil {
			if l.Key == "" || l.Field == "" || l.Capability == "" || !policyKinds[l.Kind] || l.Kind == KindTask {
				t.Errorf("%s: merged list lacks a fact: %+v", name, *l)
			}
			if !Method(l.ChangedBy).Notification || Method(l.ChangedBy).ListChanged == "" {
				t.Errorf("%s: changed by %q, not a list_changed notification", name, l.ChangedBy)
			}
			if !m.Label {
				t.Errorf("%s: a merged list without a metric label", name)
			}
		}
		if m.Notification && (m.Label || m.SessionOnly || m.CallerView || m.List != nil || m.ClientCapability != "") {
			t.Errorf("%s: a notification with a request's facts", name)
		}
	}
}

// Method's unknown row has every fact false.
func TestMethodUnknown(t *testing.T) {
	m := Method("tools/frobnicate")
	if m.Routed() || m.Label || m.List != nil || m.Name != "" {
		t.Errorf("unknown method row: %+v", m)
	}
	if _, ok := TargetOf("tools/frobnicate", []byte(`{"name":"x"}`)); ok {
		t.Error("TargetOf found a target for an unknown method")
	}
}

// The three list_changed notifications, in the order clients are told.
func TestListChangedNotifications(t *testing.T) {
	got := ListChangedNotifications()
	want := []string{NotificationToolsListChanged, NotificationPromptsChanged, NotificationResourcesChanged}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ListChangedNotifications() = %v, want %v", got, want)
	}
	if got := ListsChangedBy(NotificationResourcesChanged); strings.Join(got, ",") != "resources/list,resources/templates/list,skills/list" {
		t.Errorf("ListsChangedBy(resources) = %v", got)
	}
}
