package oauthclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestParseChallenge reads Bearer challenges as RFC 6750 and RFC 9728 write them.
func TestParseChallenge(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{`Bearer scope="a b", resource_metadata="https://x/meta"`}, `[a b] https://x/meta `},
		{[]string{`Basic realm="x", Bearer error="insufficient_scope", scope="w"`}, `[w]  insufficient_scope`},
		{[]string{`Basic realm="x"`, `bearer error=invalid_token,scope=r`}, `[r]  invalid_token`},
		{[]string{`Bearer realm="a \"q\" b", scope="s"`}, `[s]  `},
		{[]string{`Basic abc==`, `Negotiate`}, `[]  `},
		{[]string{`DPoP scope="d", Bearer scope="b"`}, `[b]  `},
		{nil, `[]  `},
	} {
		ch := ParseChallenge(tc.in)
		if got := fmt.Sprintf("%v %s %s", ch.Scopes, ch.ResourceMetadata, ch.Error); got != tc.want {
			t.Errorf("ParseChallenge(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestResourceCovers(t *testing.T) {
	for _, tc := range []struct {
		resource, upstream string
		want               bool
	}{
		{"https://a.example/mcp", "https://a.example/mcp", true},
		{"https://a.example/mcp/", "https://a.example/mcp", true},
		{"https://a.example", "https://a.example/mcp", true},
		{"https://A.example/", "https://a.example/mcp/x", true},
		{"https://a.example/mc", "https://a.example/mcp", false},
		{"https://a.example/mcp/x", "https://a.example/mcp", false},
		{"http://a.example/mcp", "https://a.example/mcp", false},
		{"https://a.example:8443/mcp", "https://a.example/mcp", false},
		{"https://evil.example/mcp", "https://a.example/mcp", false},
		{"https://a.example/mcp#f", "https://a.example/mcp", false},
		{"", "https://a.example/mcp", false},
	} {
		if got := ResourceCovers(tc.resource, tc.upstream); got != tc.want {
			t.Errorf("ResourceCovers(%q, %q) = %v, want %v", tc.resource, tc.upstream, got, tc.want)
		}
	}
}

// TestCandidates: the well-known URLs in the MCP spec's order.
func TestCandidates(t *testing.T) {
	for _, tc := range []struct {
		got  func() ([]string, error)
		want string
	}{
		{func() ([]string, error) { return PRMCandidates("https://r.example/mcp", Challenge{}), nil },
			"[https://r.example/.well-known/oauth-protected-resource/mcp https://r.example/.well-known/oauth-protected-resource]"},
		{func() ([]string, error) { return PRMCandidates("https://r.example/", Challenge{}), nil },
			"[https://r.example/.well-known/oauth-protected-resource]"},
		{func() ([]string, error) {
			return PRMCandidates("https://r.example/mcp", Challenge{ResourceMetadata: "https://r.example/custom.json"}), nil
		}, "[https://r.example/custom.json]"},
		{func() ([]string, error) { return ASCandidates("https://as.example") },
			"[https://as.example/.well-known/oauth-authorization-server https://as.example/.well-known/openid-configuration]"},
		{func() ([]string, error) { return ASCandidates("https://as.example/tenant1/") },
			"[https://as.example/.well-known/oauth-authorization-server/tenant1 https://as.example/.well-known/openid-configuration/tenant1 https://as.example/tenant1/.well-known/openid-configuration]"},
	} {
		got, err := tc.got()
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("got %v (%v), want %s", got, err, tc.want)
		}
	}
	if _, err := ASCandidates("not a url"); err == nil {
		t.Error("ASCandidates accepted a non-URL")
	}
}

// bodyTransport answers every GET with body (a fuzzed metadata document).
type bodyTransport struct{ body string }

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(b.body)), Request: r}, nil
}

// TestMetadataRefusals: documents the discovery must not use.
func TestMetadataRefusals(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`[]`, "is not a JSON object"},
		{`{"issuer":"https://as.example"}`, "names no token_endpoint"},
		{`{"issuer":"https://as.example","token_endpoint":"http://as.example/token"}`, "is plain http on a host that is not loopback"},
		{`{"issuer":"https://as.example/","token_endpoint":"https://as.example/token"}`, `names issuer "https://as.example/", not "https://as.example"`},
		{`{"issuer":"https://as.example","token_endpoint":"https://as.example/token"}` + strings.Repeat(" ", MaxDocumentBytes), "larger than"},
	} {
		d := &Discoverer{HTTP: &http.Client{Transport: bodyTransport{tc.body}}}
		if _, _, err := d.AuthorizationServer(context.Background(), "https://as.example"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

// FuzzParseChallenge: any header value parses without a panic, and what is
// read comes from the Bearer challenge.
func FuzzParseChallenge(f *testing.F) {
	for _, s := range []string{`Bearer scope="a b", resource_metadata="https://x/meta"`, `Basic realm="x", Bearer error=insufficient_scope`, `Bearer realm="\"`, `=,=`, `Bearer scope="`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ch := ParseChallenge([]string{v})
		if !strings.Contains(strings.ToLower(v), "bearer") && (len(ch.Scopes) > 0 || ch.ResourceMetadata != "" || ch.Error != "") {
			t.Errorf("ParseChallenge(%q) = %+v without a Bearer challenge", v, ch)
		}
	})
}

// FuzzServerMetadata: any document either is refused or names exactly the
// issuer asked for and a token endpoint that is safe to use.
func FuzzServerMetadata(f *testing.F) {
	for _, s := range []string{
		`{"issuer":"https://as.example","token_endpoint":"https://as.example/token","code_challenge_methods_supported":["S256"]}`,
		`{"issuer":"https://as.example","token_endpoint":"http://127.0.0.1/token"}`, `null`, `{"issuer":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		d := &Discoverer{HTTP: &http.Client{Transport: bodyTransport{body}}}
		m, _, err := d.AuthorizationServer(context.Background(), "https://as.example")
		if err != nil {
			return
		}
		if m.Issuer != "https://as.example" || SecureEndpoint(m.TokenEndpoint) != nil {
			t.Errorf("accepted %+v", m)
		}
	})
}
