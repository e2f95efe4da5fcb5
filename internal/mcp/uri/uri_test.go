package uri

import (
	"encoding/json"
	"errors"
	"os/exec"
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
		{"demo://resource/a%7Bb%7D?q=%7C%22'", ""},
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
		{"https://example.com", "https://example.com/"},
		// Characters RFC 3986 does not allow, which a WHATWG parser encodes
		// in part ("{" reads as "%7B"): one spelling, the encoded one.
		{"demo://resource/a{b}", "demo://resource/a%7Bb%7D"},
		{"demo://resource/a|^[]`\"<>", "demo://resource/a%7C%5E%5B%5D%60%22%3C%3E"},
		{`demo://resource/a?q={b}|\`, "demo://resource/a?q=%7Bb%7D%7C%5C"},
		{"https://[::1]/a[0]", "https://[::1]/a%5B0%5D"},
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

// TestCanonicalAgreesWithWHATWG: a URI Canonical accepts as it is reads
// as that very string to a WHATWG URL parser (Node's URL, which the
// TypeScript SDK's McpServer looks resources up by), and the canonical
// form it names for one it refuses reads the same as the refused one.
// So the string the policy judges is the string the upstream runs.
// Skipped without node.
func TestCanonicalAgreesWithWHATWG(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	var corpus []string
	for _, head := range []string{"demo://resource", "DEMO://Resource", "ev+demo://resource", "file://", "https://Example.com:443", "http://example.com:8080", "demo:"} {
		for _, p := range []string{"", "/", "/a", "/a/./b", "/a/../b", "/a/%2e/b", "/a/%2E%2e/b", "/a/%2e%2e/%2e%2e/%2e%2e/b", "/a/.", "/a/..", "/%61%62", "/%c3%a9", "/é", "/a{b}", "/a|b^", "/a%7bb",
			"/a//b", "/a%2Fb", `/a\b`, "/a\tb", "/a?q=%7e&r=/../x", "/a?q={x}", "/a#f", "/a b", "/a%zz", "a/../b", "/./a", "/..a/b..", "/a/...", "/%2e%2e%2fb"} {
			corpus = append(corpus, head+p)
		}
	}
	in, _ := json.Marshal(corpus)
	cmd := exec.Command(node, "-e", `const u=JSON.parse(require("fs").readFileSync(0,"utf8"));
process.stdout.write(JSON.stringify(u.map(s=>{try{return new URL(s).href}catch(e){return null}})))`)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var hrefs []*string
	if err := json.Unmarshal(out, &hrefs); err != nil || len(hrefs) != len(corpus) {
		t.Fatalf("node's answer %s: %v", out, err)
	}
	whatwg := map[string]*string{}
	for i, s := range corpus {
		whatwg[s] = hrefs[i]
	}
	for i, s := range corpus {
		c, err := Canonical(s)
		switch {
		case err == nil && hrefs[i] != nil && *hrefs[i] != s:
			t.Errorf("Canonical accepts %q as it is; a WHATWG parser reads %q", s, *hrefs[i])
		case err != nil && c != "" && hrefs[i] != nil:
			// The form to send must read as the refused one did. Ask
			// for it when the corpus does not hold it.
			h, ok := whatwg[c]
			if !ok {
				continue
			}
			// The one difference by design: the host of a non-special
			// scheme, whose case a WHATWG parser keeps and RFC 3986 does
			// not (Canonical lowers it, so that no two accepted spellings
			// name one resource to either reading).
			if h == nil || foldHost(*h) != foldHost(*hrefs[i]) {
				t.Errorf("%q reads as %q; the canonical form %q named for it reads as %v", s, *hrefs[i], c, deref(h))
			}
		}
	}
}

// foldHost lowers the scheme and authority of a URI.
func foldHost(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	end := strings.IndexAny(s[i+3:], "/?#")
	if end < 0 {
		return strings.ToLower(s)
	}
	return strings.ToLower(s[:i+3+end]) + s[i+3+end:]
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}
