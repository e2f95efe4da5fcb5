package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// typeDoc is the doc comment of a struct type and of each of its fields, by
// Go field name.
type typeDoc struct {
	doc    string
	fields map[string]string
}

// parseDocs reads the doc comments of every type declared in the Go files
// (tests excluded) of dir.
func parseDocs(dir string) (map[string]typeDoc, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]typeDoc{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		file, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				td := typeDoc{doc: text(doc), fields: map[string]string{}}
				if st, ok := ts.Type.(*ast.StructType); ok {
					for _, field := range st.Fields.List {
						d := field.Doc
						if d == nil {
							d = field.Comment
						}
						for _, name := range field.Names {
							td.fields[name.Name] = text(d)
						}
					}
				}
				out[ts.Name.Name] = td
			}
		}
	}
	return out, nil
}

// text joins a comment's lines into one paragraph.
func text(c *ast.CommentGroup) string {
	if c == nil {
		return ""
	}
	return strings.Join(strings.Fields(c.Text()), " ")
}

// sourceRef matches a parenthesised pointer into the Go source, such as
// "(upstream_oauth.go)" or "(see internal/auth)": noise in an editor.
var sourceRef = regexp.MustCompile(`\s*\((?:see )?[^()]*(?:\.go|internal/[a-z/]+)\)`)

// describe turns a Go doc comment into a description for editors: Go
// field names become the YAML keys the reader writes, and pointers into
// the source go. keys maps the struct's Go field names to their YAML keys;
// acronyms among them (URL) are replaced only as the comment's subject
// unless anywhere is set (a type's comment, which never starts with one).
func describe(doc string, keys map[string]string, anywhere bool) string {
	doc = sourceRef.ReplaceAllString(doc, "")
	for goName, key := range keys {
		if goName == strings.ToUpper(goName) && !anywhere {
			// An acronym (URL, OIDC) is also an ordinary word: replace it
			// only as the subject that starts the comment.
			if rest, ok := strings.CutPrefix(doc, goName+" "); ok {
				doc = key + " " + rest
			}
			continue
		}
		doc = regexp.MustCompile(`\b`+regexp.QuoteMeta(goName)+`\b`).ReplaceAllString(doc, key)
	}
	return doc
}

// mdRow is one key's row in docs/configuration.md.
type mdRow struct{ def, meaning string }

var (
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*)$`)
	backtickRE = regexp.MustCompile("`([^`]+)`")
	mdLinkRE   = regexp.MustCompile(`\[([^\]]+)\]\([^)]*\)`)
)

// parseReference reads the key tables of docs/configuration.md, by section
// path ("" for the top level, "upstreams.<name>", "auth.issuers[]") and
// key. The layout is the one internal/config's docs test enforces: a
// heading naming the section's paths in backticks, then rows
// | `key` | type | default | meaning |.
func parseReference(doc string) map[string]map[string]mdRow {
	out := map[string]map[string]mdRow{}
	var paths []string
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence {
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			paths = nil
			if strings.EqualFold(strings.TrimSpace(m[2]), "Top level") {
				paths = []string{""}
			}
			for _, b := range backtickRE.FindAllStringSubmatch(m[2], -1) {
				paths = append(paths, b[1])
			}
			continue
		}
		// \| is a pipe inside a cell.
		line = strings.ReplaceAll(line, `\|`, "\x00")
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[0]), "`")
		row := mdRow{def: plain(cells[2]), meaning: plain(strings.Join(cells[3:], "|"))}
		for _, p := range paths {
			if out[p] == nil {
				out[p] = map[string]mdRow{}
			}
			out[p][key] = row
		}
	}
	return out
}

// plain strips Markdown from a table cell: code spans, emphasis and links.
func plain(s string) string {
	s = mdLinkRE.ReplaceAllString(strings.TrimSpace(s), "$1")
	s = strings.NewReplacer("`", "", "**", "", "\x00", "|").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}
