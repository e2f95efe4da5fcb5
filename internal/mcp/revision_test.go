package mcp

import "testing"

func TestRevision(t *testing.T) {
	for _, tc := range []struct {
		r                      Revision
		initializes, stateless bool
		atLeast20251125        bool
	}{
		{Version20260728, false, true, true},
		{Version20251125, true, false, true},
		{Version20250618, true, false, false},
		{Version20241105, true, false, false},
		{"2099-01-01", false, false, true}, // unknown: neither family
		{"", false, false, false},
	} {
		if got := tc.r.Initializes(); got != tc.initializes {
			t.Errorf("%q.Initializes() = %v", tc.r, got)
		}
		if got := tc.r.Stateless(); got != tc.stateless {
			t.Errorf("%q.Stateless() = %v", tc.r, got)
		}
		if got := tc.r.AtLeast(Version20251125); got != tc.atLeast20251125 {
			t.Errorf("%q.AtLeast(2025-11-25) = %v", tc.r, got)
		}
	}
	if got := JoinRevisions(SupportedVersions); got != "2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05" {
		t.Errorf("JoinRevisions = %q", got)
	}
	if AllVersions[0] != Version20260728 || len(AllVersions) != len(SupportedVersions)+len(StatelessVersions) {
		t.Errorf("AllVersions = %v", AllVersions)
	}
}

func TestServerCapabilitiesFor(t *testing.T) {
	caps := []byte(`{"tools":{"listChanged":true},"completions":{},"tasks":{"list":{}},"logging":{}}`)
	for _, tc := range []struct {
		r    Revision
		want string
	}{
		{Version20241105, `{"tools":{"listChanged":true},"logging":{}}`},
		{Version20250326, `{"tools":{"listChanged":true},"completions":{},"logging":{}}`},
		{Version20250618, `{"tools":{"listChanged":true},"completions":{},"logging":{}}`},
		{Version20251125, string(caps)},
	} {
		if got := string(ServerCapabilitiesFor(caps, tc.r)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.r, got, tc.want)
		}
	}
}
