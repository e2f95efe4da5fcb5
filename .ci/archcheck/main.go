// Command archcheck holds the code to docs/architecture.md: the import
// rules it states (non-test imports, from `go list`), that client and host
// never assert a concrete transport type, and its package tables, which
// must name exactly the packages that exist. .ci/run runs it;
// run it by hand with `go run ./.ci/archcheck` from the repository root.
//
// A rule that the code still breaks for a reason being worked on is listed
// in exceptions with that reason; an exception that no longer occurs fails
// the check too, so that it is deleted rather than left to hide a new one.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

const module = "github.com/mcpgw/mcpgw/"

// A rule constrains what the packages matching from import of the module's
// packages: none matching never, and, when only is set, none outside only.
// Patterns: "x" is the package x, "x/..." is x and every package below it,
// "x/*" every package below x (not x itself).
type rule struct {
	name    string // as docs/architecture.md states it
	from    []string
	notFrom []string // packages from leaves out
	never   []string
	only    []string
}

// wire are the packages that know the wire format and nothing above it.
var wire = []string{"internal/rawjson", "internal/jsonrpc", "internal/sse", "internal/http1"}

func rules() []rule {
	return []rule{
		{name: "wire packages import nothing above them", from: wire, only: wire},
		{name: "mcp imports only the wire packages and its own subpackages", from: []string{"internal/mcp/..."}, only: append([]string{"internal/mcp/..."}, wire...)},
		{name: "upcall imports only mcp and the wire packages", from: []string{"internal/upcall"}, only: append([]string{"internal/mcp"}, wire...)},
		{name: "config imports only its own subpackages", from: []string{"internal/config/..."}, only: []string{"internal/config/..."}},
		{name: "client never imports host, catalog, router or credentials", from: []string{"internal/client"},
			never: []string{"internal/host/...", "internal/catalog/...", "internal/router/...", "internal/credentials/..."}},
		{name: "host never imports catalog or router", from: []string{"internal/host/..."}, never: []string{"internal/catalog/...", "internal/router/..."}},
		{name: "host never imports credentials' subpackages", from: []string{"internal/host/..."}, never: []string{"internal/credentials/*"}},
		{name: "credentials never imports host, catalog, router or client", from: []string{"internal/credentials/..."},
			never: []string{"internal/host/...", "internal/catalog/...", "internal/router/...", "internal/client/..."}},
		{name: "catalog never imports router", from: []string{"internal/catalog/..."}, never: []string{"internal/router/..."}},
		{name: "router's packages never import host or client", from: []string{"internal/router/*"}, never: []string{"internal/host/...", "internal/client/..."}},
		{name: "router never imports client", from: []string{"internal/router"}, never: []string{"internal/client/..."}},
		{name: "only the programs (cmd, bench) and the tests' gatewaytest import gateway", from: []string{"..."}, notFrom: []string{"cmd/...", "bench", "internal/gateway/...", "internal/gatewaytest"}, never: []string{"internal/gateway/..."}},
		{name: "only tests import gatewaytest", from: []string{"..."}, never: []string{"internal/gatewaytest/..."}},
		{name: "cmd never imports host or client", from: []string{"cmd/..."}, never: []string{"internal/host/...", "internal/client/..."}},
		{name: "internal never imports test", from: []string{"internal/..."}, never: []string{"test/..."}},
	}
}

// exceptions are imports a rule forbids that the code still has, each with
// why and who removes it: "from to".
var exceptions = map[string]string{}

func match(pattern, pkg string) bool {
	switch {
	case pattern == "...":
		return true
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	case strings.HasSuffix(pattern, "/*"):
		return strings.HasPrefix(pkg, strings.TrimSuffix(pattern, "*"))
	}
	return pkg == pattern
}

func matchAny(patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, pkg) })
}

// packages lists the module's packages with their non-test imports of the
// module's packages, both relative to the module path.
func packages() (map[string][]string, error) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go list: %v\n%s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue
		}
		name := strings.TrimPrefix(f[0], module)
		pkgs[name] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				pkgs[name] = append(pkgs[name], strings.TrimPrefix(imp, module))
			}
		}
	}
	return pkgs, sc.Err()
}

// checkImports returns a line per import a rule forbids, and per exception
// that no longer occurs.
func checkImports(pkgs map[string][]string, exceptions map[string]string) []string {
	var bad []string
	used := map[string]bool{}
	for _, from := range slices.Sorted(maps.Keys(pkgs)) {
		for _, r := range rules() {
			if !matchAny(r.from, from) || matchAny(r.notFrom, from) {
				continue
			}
			for _, to := range pkgs[from] {
				forbidden := matchAny(r.never, to) || (r.only != nil && !matchAny(r.only, to))
				if !forbidden {
					continue
				}
				key := from + " " + to
				if _, ok := exceptions[key]; ok {
					used[key] = true
					continue
				}
				bad = append(bad, fmt.Sprintf("%s imports %s: breaks %q (docs/architecture.md, Import rules)", from, to, r.name))
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(exceptions)) {
		if !used[key] {
			bad = append(bad, fmt.Sprintf("exception %q (%s) no longer occurs: delete it from .ci/archcheck", key, exceptions[key]))
		}
	}
	return bad
}

// The transports' seam: the client and the host ask a transport for a
// capability (an interface it declares), never for its concrete type, so
// that what a transport can do is said in one place, by the transport.
const transportPkg = "internal/client"

var seamDirs = []string{"internal/client", "internal/host"}

// transportTypes are the types of the package in dir that implement its
// Transport, by their methods: every type with both Start and Send.
func transportTypes(dir string) (map[string]bool, error) {
	_, files, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	methods := map[string]map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			name := baseName(fd.Recv.List[0].Type, "")
			if name == "" {
				continue
			}
			if methods[name] == nil {
				methods[name] = map[string]bool{}
			}
			methods[name][fd.Name.Name] = true
		}
	}
	types := map[string]bool{}
	for name, m := range methods {
		if m["Start"] && m["Send"] {
			types[name] = true
		}
	}
	return types, nil
}

// parseDir parses the non-test Go files of dir.
func parseDir(dir string) (*token.FileSet, []*ast.File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	return fset, files, nil
}

// baseName is the type name e names, through a pointer: X or *X, or, when
// qual is set, qual.X or *qual.X; "" for anything else.
func baseName(e ast.Expr, qual string) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.Ident:
		if qual == "" {
			return x.Name
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok && qual != "" && id.Name == qual {
			return x.Sel.Name
		}
	}
	return ""
}

// checkAssertions returns a line per type assertion, and per type switch
// case, in the non-test files of dirs that names one of types: bare in
// the package that declares them (own), qualified elsewhere.
func checkAssertions(dirs []string, own string, types map[string]bool) ([]string, error) {
	var bad []string
	for _, dir := range dirs {
		fset, files, err := parseDir(dir)
		if err != nil {
			return nil, err
		}
		qual := ""
		if dir != own {
			qual = filepath.Base(own)
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				var named []ast.Expr
				switch x := n.(type) {
				case *ast.TypeAssertExpr:
					named = append(named, x.Type) // nil in a type switch's guard
				case *ast.CaseClause:
					named = append(named, x.List...)
				}
				for _, e := range named {
					if e == nil {
						continue
					}
					if name := baseName(e, qual); types[name] {
						bad = append(bad, fmt.Sprintf("%s: asserts the concrete transport type %s: ask for a capability (an interface the transport declares) instead (docs/architecture.md, Import rules)", fset.Position(e.Pos()), name))
					}
				}
				return true
			})
		}
	}
	return bad, nil
}

// tableName finds the package names in a markdown table row's first cell:
// `internal/x`, `cmd/mcpgw` and the like, backquoted.
var tableName = regexp.MustCompile("`((?:internal|cmd|test)/[A-Za-z0-9_./-]+|bench|configs|deploy)`")

// checkDoc returns a line per package docs/architecture.md's package
// tables leave out, and per name in them that is no package.
func checkDoc(path string, pkgs map[string][]string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.SplitN(line, "|", 3)
		for _, m := range tableName.FindAllStringSubmatch(cells[1], -1) {
			listed[m[1]] = true
		}
	}
	var bad []string
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		if !listed[p] {
			bad = append(bad, fmt.Sprintf("%s: package %s is not in a package table; add a row saying what it owns", path, p))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(listed)) {
		if _, ok := pkgs[p]; !ok {
			bad = append(bad, fmt.Sprintf("%s: the package table names %s, which is no package; remove or rename its row", path, p))
		}
	}
	return bad, nil
}

func main() {
	pkgs, err := packages()
	if err != nil {
		fmt.Fprintln(os.Stderr, "archcheck:", err)
		os.Exit(2)
	}
	bad := checkImports(pkgs, exceptions)
	types, err := transportTypes(transportPkg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "archcheck:", err)
		os.Exit(2)
	}
	if len(types) == 0 {
		fmt.Fprintf(os.Stderr, "archcheck: no type in %s has Start and Send: the transport check would check nothing\n", transportPkg)
		os.Exit(2)
	}
	seamBad, err := checkAssertions(seamDirs, transportPkg, types)
	if err != nil {
		fmt.Fprintln(os.Stderr, "archcheck:", err)
		os.Exit(2)
	}
	bad = append(bad, seamBad...)
	docBad, err := checkDoc("docs/architecture.md", pkgs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "archcheck:", err)
		os.Exit(2)
	}
	bad = append(bad, docBad...)
	for _, b := range bad {
		fmt.Println(b)
	}
	if len(bad) > 0 {
		fmt.Printf("archcheck: %d problems\n", len(bad))
		os.Exit(1)
	}
	fmt.Printf("archcheck: %d packages keep the import rules and are in docs/architecture.md; %d transport types are asserted nowhere\n", len(pkgs), len(types))
}
