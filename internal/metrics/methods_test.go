package metrics

import (
	"maps"
	"testing"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

// The method label's values are the method table's labelled methods and
// "other", nothing more or less: a method left out of the table would be
// counted as "other" without anyone noticing.
func TestMethodLabelsAreTheTables(t *testing.T) {
	want := map[string]bool{"other": true}
	for _, m := range mcp.LabelMethods() {
		want[m] = true
	}
	got := map[string]bool{}
	for _, m := range Methods {
		if got[m] {
			t.Errorf("label %q twice", m)
		}
		got[m] = true
	}
	if !maps.Equal(got, want) {
		t.Errorf("method labels %v, want the table's %v", Methods, want)
	}
	for _, m := range mcp.RoutedMethods() {
		if Methods[methodIdx(m)] != m {
			t.Errorf("routed method %s is counted as %q", m, Methods[methodIdx(m)])
		}
	}
	for _, m := range mcp.ListMethods() {
		if Methods[methodIdx(m)] != m {
			t.Errorf("list method %s is counted as %q", m, Methods[methodIdx(m)])
		}
	}
}
