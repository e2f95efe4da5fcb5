package uri

import (
	"errors"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		// Already canonical: returned as is.
		{"demo://resource/static/document/instructions.md", ""},
		{"file:///data/a.txt", ""},
		{"file:///dir/", ""},
		{"urn:isbn:0451450523", ""},
		{"demo://resource/x?a=1&b=%2F", ""},
		{"https://example.com:8443/a", ""},
		{"https://[::1]:8443/a", ""},
		{"ev+demo://resource/static/document/instructions.md", ""},
		{"test://template/{id}/data", ""},
		{"demo://resource/caf%C3%A9", ""},
		// Dot-segments, also percent-encoded in any case.
		{"demo://resource/static/document/x/../instructions.md", "demo://resource/static/document/instructions.md"},
		{"demo://resource/static/document/./instructions.md", "demo://resource/static/document/instructions.md"},
		{"demo://resource/static/document/%2e/instructions.md", "demo://resource/static/document/instructions.md"},
		{"demo://resource/static/document/%2E/instructions.md", "demo://resource/static/document/instructions.md"},
		{"demo://resource/static/document/../../dynamic/text/7", "demo://resource/dynamic/text/7"},
		{"demo://resource/static/document/%2e%2E/%2E%2e/dynamic/text/7", "demo://resource/dynamic/text/7"},
		{"ev+demo://resource/static/document/%2e%2e/%2e%2e/dynamic/text/7", "ev+demo://resource/dynamic/text/7"},
		{"demo://resource/../../../x", "demo://resource/x"},
		{"demo://resource/a/..", "demo://resource/"},
		{"demo://resource/a/.", "demo://resource/a/"},
		{"file:///data/../etc/passwd", "file:///etc/passwd"},
		{"/data/../etc/passwd", "/etc/passwd"},
		// Case of scheme and host; percent-encoding.
		{"DEMO://Resource/static/document/instructions.md", "demo://resource/static/document/instructions.md"},
		{"HTTPS://Example.COM/A", "https://example.com/A"},
		{"demo://resource/static/document/%69nstructions.md", "demo://resource/static/document/instructions.md"},
		{"demo://resource/caf%c3%a9", "demo://resource/caf%C3%A9"},
		{"demo://resource/café", "demo://resource/caf%C3%A9"},
		{"demo://resource/x?q=%7e", "demo://resource/x?q=~"},
		{"https://example.com:443/a", "https://example.com/a"},
		{"http://example.com:/a", "http://example.com/a"},
	} {
		got, err := Canonical(tc.in)
		want := tc.want
		if want == "" {
			if err != nil || got != tc.in {
				t.Errorf("Canonical(%q) = %q, %v; want it unchanged", tc.in, got, err)
			}
			continue
		}
		var ue *Error
		if got != want || !errors.As(err, &ue) || ue.Canonical != want || !strings.Contains(err.Error(), "send "+want) {
			t.Errorf("Canonical(%q) = %q, %v; want %q and an error naming it", tc.in, got, err, want)
		}
		if again, err := Canonical(got); err != nil || again != got {
			t.Errorf("Canonical(%q) = %q, %v; a canonical form must be stable", got, again, err)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	for _, in := range []string{
		"demo://resource/static/document%2Finstructions.md",
		"demo://resource/static/document%2finstructions.md",
		"demo://resource/static/document/x%2F..%2Finstructions.md",
		"demo://resource/static/document%5Cinstructions.md",
		`demo://resource/static/document\..\instructions.md`,
		`file:///data\..\etc\passwd`,
		"demo://resource/static/document/instr\tuctions.md",
		"demo://resource/static/document/instr\nuctions.md",
		" demo://resource/x",
		"demo://resource/static//document/instructions.md",
		"demo:static/../instructions.md",
		"demo:static/%2e%2e/instructions.md",
		"demo://resource/100%",
		"demo://resource/%zz",
		"demo://resource/static/document/instructions.md#x",
		"demo://résource/x",
		"demo://resource:8x/x",
	} {
		got, err := Canonical(in)
		var ue *Error
		if !errors.As(err, &ue) || ue.Canonical != "" || got != "" {
			t.Errorf("Canonical(%q) = %q, %v; want a refusal without a canonical form", in, got, err)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	f.Add("demo://resource/static/document/x/../instructions.md")
	f.Add("file:///a/%2e%2E/b?x=%7e")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Canonical(s)
		var ue *Error
		if err != nil && !errors.As(err, &ue) {
			t.Fatalf("error %v is not an *Error", err)
		}
		if c == "" {
			return
		}
		if again, err := Canonical(c); err != nil || again != c {
			t.Fatalf("Canonical(%q) = %q; Canonical of that = %q, %v", s, c, again, err)
		}
		for _, seg := range strings.Split(pathOf(c), "/") {
			if seg == ".." || seg == "." {
				t.Fatalf("Canonical(%q) = %q keeps a dot-segment", s, c)
			}
		}
	})
}

// pathOf is the path of s, the only place where dot-segments mean
// something.
func pathOf(s string) string {
	if sc, ok := schemeOf(s); ok {
		s = s[len(sc)+1:]
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	if a, ok := strings.CutPrefix(s, "//"); ok {
		if i := strings.IndexByte(a, '/'); i >= 0 {
			return a[i:]
		}
		return ""
	}
	return s
}
