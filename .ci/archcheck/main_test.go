package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"internal/config/...", "internal/config", true},
		{"internal/config/...", "internal/config/strictyaml", true},
		{"internal/config/...", "internal/configx", false},
		{"internal/router/*", "internal/router", false},
		{"internal/router/*", "internal/router/core", true},
		{"internal/router", "internal/router/core", false},
		{"...", "bench", true},
	} {
		if got := match(c.pattern, c.pkg); got != c.want {
			t.Errorf("match(%q, %q) = %v, want %v", c.pattern, c.pkg, got, c.want)
		}
	}
}

// A forbidden import is reported with the rule it breaks; an allowed one,
// and one an exception names, are not; an exception that is not used is.
func TestCheckImports(t *testing.T) {
	pkgs := map[string][]string{
		"internal/config":      {"internal/config/strictyaml", "internal/policy/cond"},
		"internal/router/edge": {"internal/client"},
		"internal/router/core": {"internal/host"},
		"internal/upcall":      {"internal/mcp", "internal/jsonrpc", "internal/host"},
		"cmd/mcpgw":            {"internal/gateway"},
		"internal/demo":        {"internal/gateway"},
		// A credential kind back in host, and credentials reaching up.
		"internal/host":                {"internal/credentials", "internal/credentials/oauthclient"},
		"internal/credentials/peruser": {"internal/credentials", "internal/host"},
	}
	exceptions := map[string]string{
		"internal/router/core internal/host":   "removed by arch-view",
		"internal/router/core internal/client": "removed by arch-view",
	}
	got := strings.Join(checkImports(pkgs, exceptions), "\n")
	for _, want := range []string{
		`internal/config imports internal/policy/cond: breaks "config imports only its own subpackages"`,
		`internal/router/edge imports internal/client: breaks "router's packages never import host or client"`,
		`internal/demo imports internal/gateway: breaks "only the programs (cmd, bench) and the tests' gatewaytest import gateway"`,
		`internal/upcall imports internal/host: breaks "upcall imports only mcp and the wire packages"`,
		`exception "internal/router/core internal/client" (removed by arch-view) no longer occurs`,
		`internal/host imports internal/credentials/oauthclient: breaks "host never imports credentials' subpackages"`,
		`internal/credentials/peruser imports internal/host: breaks "credentials never imports host, catalog, router or client"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, not := range []string{"strictyaml", "cmd/mcpgw imports", "internal/router/core imports internal/host", "upcall imports internal/mcp", "upcall imports internal/jsonrpc", "imports internal/credentials:"} {
		if strings.Contains(got, not) {
			t.Errorf("reported %q:\n%s", not, got)
		}
	}
}

func TestCheckDoc(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "architecture.md")
	table := "| package | owns |\n| --- | --- |\n| `internal/a`, `internal/b` | x |\n| `internal/gone` | y |\n"
	if err := os.WriteFile(doc, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	bad, err := checkDoc(doc, map[string][]string{"internal/a": nil, "internal/b": nil, "internal/c": nil})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(bad, "\n")
	if len(bad) != 2 || !strings.Contains(got, "package internal/c is not in a package table") || !strings.Contains(got, "names internal/gone, which is no package") {
		t.Errorf("got:\n%s", got)
	}
}

// The transport types are found by their methods; an assertion or type
// switch case naming one, bare in its package or qualified in another, is
// reported, and one naming an interface, or in a test file, is not.
func TestCheckAssertions(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("client/t.go", `package client
type Transport interface{ Send() }
type Pipe struct{}
func (*Pipe) Start() {}
func (*Pipe) Send() {}
type Child interface{ PID() int }
type Client struct{ t Transport }
func (c *Client) a() bool { _, ok := c.t.(*Pipe); return ok }
func (c *Client) b() bool { _, ok := c.t.(Child); return ok }
`)
	write("client/t_test.go", `package client
func (c *Client) c() bool { _, ok := c.t.(*Pipe); return ok }
`)
	write("host/h.go", `package host
import "client"
func a(t client.Transport) bool {
	switch t.(type) {
	case *client.Pipe:
		return true
	case client.Child:
	}
	return false
}
`)
	own, host := filepath.Join(root, "client"), filepath.Join(root, "host")
	types, err := transportTypes(own)
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != 1 || !types["Pipe"] {
		t.Fatalf("transport types = %v, want Pipe alone", types)
	}
	bad, err := checkAssertions([]string{own, host}, own, types)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(bad, "\n")
	if len(bad) != 2 || !strings.Contains(got, "t.go:8:") || !strings.Contains(got, "h.go:5:") || !strings.Contains(got, "concrete transport type Pipe") {
		t.Errorf("got:\n%s", got)
	}
}
