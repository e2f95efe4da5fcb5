package catalog

import (
	"context"
	"strings"
	"testing"
)

// The search tool's upstream argument: an upstream the caller may see
// nothing of is refused exactly as one the route does not have, and the
// refusal lists only the upstreams the caller may see (issue 37 item 4).
func TestSearchRefusesAnUpstreamNotShown(t *testing.T) {
	h, _ := namingHost(t)
	v := NewView(h, nil, true)
	shown := Shown(func(up string) bool { return up != "budget" })
	all := func(string, []byte) bool { return true }
	_, hidden := v.SearchTools(context.Background(), "anything", "budget", 5, all, shown)
	_, none := v.SearchTools(context.Background(), "anything", "zzz", 5, all, shown)
	if hidden == nil || none == nil {
		t.Fatalf("search of a hidden upstream: %v; of none: %v; want both refused", hidden, none)
	}
	if got := strings.Replace(hidden.Message, `"budget"`, `"zzz"`, 1); got != none.Message || hidden.Code != none.Code {
		t.Errorf("hidden upstream answered %d %q, unknown one %d %q: a caller can tell them apart", hidden.Code, hidden.Message, none.Code, none.Message)
	}
	if strings.Contains(none.Message, "budget") {
		t.Errorf("the refusal names budget, which the caller may see nothing of: %s", none.Message)
	}
}
