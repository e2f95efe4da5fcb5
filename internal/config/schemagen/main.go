// Command schemagen writes the JSON Schema of mcpgw's config file from the
// Go types in internal/config: docs/config.schema.json, for editors
// (yaml-language-server, VS Code, IntelliJ), and the same definitions into
// the Helm chart's values.schema.json, so that `helm install` checks the
// chart's config: value too.
//
// The schema follows the loader: keys are the yaml tags (unknown keys are
// errors, as in config.Parse), descriptions are the fields' doc comments,
// (or, for a field without one, its row in docs/configuration.md, with the
// default that row gives), and enums, patterns, minimums and required keys come from the table in
// rules.go, which tests check against the loader's own verdicts. Every
// scalar may instead be a string holding ${VAR}, which the loader expands
// before reading it.
//
// Regenerate after changing a config type (one command, from the
// repository root):
//
//	go generate ./internal/config/schemagen
//
// A test fails while the committed files differ from what this writes.
package main

//go:generate go run . -root ../../..

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// Paths relative to the repository root.
const (
	configSrc        = "internal/config"
	configSchemaPath = "docs/config.schema.json"
	referencePath    = "docs/configuration.md"
	valuesSchemaPath = "deploy/helm/mcpgw/values.schema.json"
)

func main() {
	root := flag.String("root", ".", "the repository root (`DIR`)")
	check := flag.Bool("check", false, "write nothing; exit 1 if a file is stale")
	flag.Parse()
	stale, err := run(*root, *check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
	for _, f := range stale {
		if *check {
			fmt.Fprintf(os.Stderr, "schemagen: %s is stale; run: go generate ./internal/config/schemagen\n", f)
		} else {
			fmt.Println("schemagen: wrote", f)
		}
	}
	if *check && len(stale) > 0 {
		os.Exit(1)
	}
}

// run generates both files under root and returns those whose content
// changed (written unless check).
func run(root string, check bool) ([]string, error) {
	files, err := render(root)
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, rel := range []string{configSchemaPath, valuesSchemaPath} {
		path := filepath.Join(root, rel)
		old, _ := os.ReadFile(path)
		if string(old) == string(files[rel]) {
			continue
		}
		changed = append(changed, rel)
		if !check {
			if err := os.WriteFile(path, files[rel], 0o644); err != nil {
				return nil, err
			}
		}
	}
	return changed, nil
}

// render returns the content of both files, by path relative to root.
func render(root string) (map[string][]byte, error) {
	docs, err := parseDocs(filepath.Join(root, configSrc))
	if err != nil {
		return nil, err
	}
	ref, err := os.ReadFile(filepath.Join(root, referencePath))
	if err != nil {
		return nil, err
	}
	s, err := generate(docs, parseReference(string(ref)))
	if err != nil {
		return nil, err
	}
	cfg, err := encode(s)
	if err != nil {
		return nil, err
	}
	valuesPath := filepath.Join(root, valuesSchemaPath)
	values, err := os.ReadFile(valuesPath)
	if err != nil {
		return nil, err
	}
	merged, err := intoValuesSchema(values, s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", valuesPath, err)
	}
	return map[string][]byte{configSchemaPath: cfg, valuesSchemaPath: merged}, nil
}
