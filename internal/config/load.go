package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong with a config file. Msg says what is wrong and
// Problem is one thing wrong with a config file: where, and the fix.
type Problem = strictyaml.Problem

// Problems is every problem found in a config file; it is the error Parse
// and Load return.
type Problems = strictyaml.Problems

// A Check validates what another package owns of a config and can judge
// only by compiling it: internal/policy's CheckConfig checks the policy
// section's globs and CEL conditions, so that config imports nothing above
// it and each is compiled by one package. add reports a problem at a path
// (with the line that sets it), among config's own. The CLI passes every
// Check to Load, so that `mcpgw validate` lists every problem at once.
type Check func(c *Config, add func(path, msg string))

// Load reads the config file at path and parses it with Parse. env looks up
// environment variables for ${VAR} expansion (os.LookupEnv in production).
func Load(path string, env func(string) (string, bool), checks ...Check) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(path, filepath.Dir(abs), data, env, checks)
}

// Parse decodes, expands, defaults and validates a YAML config. name labels
// problems (usually the file path). env looks up variables for ${VAR}
// expansion; nil means no variable is set.
//
// On failure the error is Problems listing everything wrong (what config
// itself checks, then what each of checks finds), except that a YAML
// syntax error stops parsing on its own.
func Parse(name string, data []byte, env func(string) (string, bool), checks ...Check) (*Config, error) {
	return parse(name, "", data, env, checks)
}

// parse is Parse, with relative paths resolved against base (paths.go)
// unless it is "".
func parse(name, base string, data []byte, env func(string) (string, bool), checks []Check) (*Config, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	root, prob := parseYAML(data)
	if prob != nil {
		prob.File = name
		return nil, Problems{*prob}
	}

	d := strictyaml.New(env)
	cfg := &Config{}
	if root != nil {
		d.Decode(root, reflect.ValueOf(cfg).Elem(), "")
	}
	applyDefaults(cfg, d)
	if base != "" {
		cfg.resolvePaths(base) // paths.go
	}
	v := &validator{cfg: cfg, dec: d}
	v.validate()
	for _, check := range checks {
		check(cfg, v.add)
	}

	ps := append(d.Problems(), v.problems...)
	if len(ps) == 0 {
		return cfg, nil
	}
	for i := range ps {
		ps[i].File = name
	}
	// Global problems (line 0) first, then in file order; equal lines keep
	// the order they were found in.
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
	return nil, ps
}

// parseYAML returns the content of the file's only document, nil for an
// empty file, or a syntax problem.
func parseYAML(data []byte) (root *yaml.Node, prob *Problem) {
	// yaml.v3 panics on a few malformed inputs ("internal error"); a bad
	// file must never take the gateway down, so report it like a syntax error.
	defer func() {
		if r := recover(); r != nil {
			root, prob = nil, &Problem{Msg: fmt.Sprintf("YAML parser failed (%v); check the file's syntax", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		prob := syntaxProblem(err)
		if l := problemLine(data, prob.Line); l > 0 {
			prob.Line = l
		}
		return nil, prob
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxProblem(err)
	default:
		return nil, &Problem{Line: extra.Line, Msg: "a second YAML document starts here (after ---); a config file holds one document, so remove the --- and merge or delete the rest"}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return nil, nil
}

// problemLineBudget bounds the bytes problemLine parses (a few MiB: a
// config of thousands of lines), so that a huge broken file costs a
// bounded time; past it the parser's own line stands.
const problemLineBudget = 8 << 20

// problemLine finds the line a YAML syntax error is on, or 0. yaml.v3
// reports the line where the enclosing construct began (a flow sequence, a
// block mapping), often 0-based, not the line at fault. The line at fault
// is the one after the longest prefix of whole lines that still parses:
// every longer prefix fails, and the shorter ones that fail only do so by
// being cut inside a construct that a later line closes. reported (the
// parser's line) bounds the search from below: the problem is never before
// the construct it is in.
func problemLine(data []byte, reported int) int {
	ends := []int{0} // ends[k]: the length of the first k lines
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if ends[len(ends)-1] < len(data) {
		ends = append(ends, len(data)) // an unterminated last line
	}
	// The shortest prefix worth trying, in lines; one line of slack for
	// the parser's 0- or 1-based numbering.
	from := max(reported-2, 0)
	spent := 0
	for k := len(ends) - 2; k >= from; k-- {
		prefix := data[:ends[k]]
		if spent += len(prefix); spent > problemLineBudget {
			return 0
		}
		if parses(prefix) {
			return k + 1
		}
	}
	return 0
}

// parses reports whether data is well-formed YAML (one or more documents).
func parses(data []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		switch err := dec.Decode(&n); {
		case errors.Is(err, io.EOF):
			return true
		case err != nil:
			return false
		}
	}
}

// syntaxProblem turns a yaml.v3 error ("yaml: line 3: message") into a Problem.
func syntaxProblem(err error) *Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, after
			}
		}
	}
	hint := "fix the YAML syntax here (check indentation, quoting and colons)"
	if strings.Contains(msg, "cannot start any token") {
		hint = "YAML does not allow tabs for indentation, and characters like @ or ` must be quoted"
	}
	return &Problem{Line: line, Msg: fmt.Sprintf("YAML syntax error: %s; %s", msg, hint)}
}
