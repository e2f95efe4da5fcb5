package pattern

import "testing"

func TestPrefixed(t *testing.T) {
	for _, tc := range []struct {
		glob, prefix string
		may, all     bool
	}{
		{"*", "github__", true, true},
		{"github__*", "github__", true, true},
		{"git*", "github__", true, true},
		{"gi?hub*", "github__", true, true},
		{"github__create_*", "github__", true, false},
		{"github__x", "github__", true, false},
		{"git", "github__", false, false},
		{"gitlab__*", "github__", false, false},
		{"*__delete", "github__", true, false},
		{"g*b__*", "github__", true, false},
		{"fs+file:///pub/*", "fs+", true, false},
		{"fs__*", "github__", false, false},
		{"x", "", true, false},
	} {
		g := MustCompile(tc.glob)
		if got := g.MayMatchPrefixed(tc.prefix); got != tc.may {
			t.Errorf("%q.MayMatchPrefixed(%q) = %v, want %v", tc.glob, tc.prefix, got, tc.may)
		}
		if got := g.MatchesAllPrefixed(tc.prefix); got != tc.all {
			t.Errorf("%q.MatchesAllPrefixed(%q) = %v, want %v", tc.glob, tc.prefix, got, tc.all)
		}
	}
}
