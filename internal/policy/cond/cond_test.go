package cond

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"

	who "github.com/mcpgw/mcpgw/internal/principal"
)

func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		src, err string
	}{
		{`"admin" in principal.groups`, ""},
		{`arguments.repo.startsWith("acme/")`, ""},
		{`principal.claims.dept == "r" && principal.client_id != "" && principal.api_key == "" && principal.issuer == "" && "s" in principal.scopes`, ""},
		{`kind == "tool" && route.startsWith("/mcp") && name.matches("^github__")`, ""},
		{`arguments.?force.orValue(false) == true && arguments.limit <= 100 && arguments.s.lowerAscii() == "x"`, ""},
		// The examples of docs/policy.md.
		{`!("admin" in principal.groups) && arguments.?force.orValue(false) == true`, ""},
		{`principal.subject.endsWith("@acme.example") && normpath(arguments.repo).startsWith("acme/")`, ""},
		{`!normpath(arguments.repo).startsWith("acme/")`, ""},
		{`normpath(arguments.path).startsWith("/data/")`, ""},
		{``, "the expression is empty"},
		{`  `, "the expression is empty"},
		{strings.Repeat("true && ", 600) + "true", "bytes long, more than 4096"},
		{`principal.grups == []`, "undefined field 'grups' (at 1:10 of the expression)"},
		{`principal.subject == 1`, "found no matching overload for '_==_' applied to '(string, int)'"},
		{`args.x == 1`, "undeclared reference to 'args' (at 1:1 of the expression)"},
		{`name`, "the expression is of type string, not bool"},
		{`arguments.flag`, "the expression is of type dyn, not bool"},
		{`(`, "Syntax error"},
	} {
		c, err := Compile(tc.src)
		if cerr := Check(tc.src); (cerr == nil) != (err == nil) || (err != nil && cerr.Error() != err.Error()) {
			t.Errorf("Check(%.60q) = %v, Compile's error %v", tc.src, cerr, err)
		}
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Compile(%q): %v", tc.src, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Compile(%.60q) = %v, want an error containing %q", tc.src, err, tc.err)
		case err == nil && c.String() != tc.src:
			t.Errorf("String() = %q", c.String())
		}
	}
}

func TestEval(t *testing.T) {
	in := Input{
		Principal: who.Principal{Subject: "alice", Groups: []string{"eng"}, Claims: map[string]any{"dept": "r"}},
		Route:     "/mcp", Kind: "tool", Name: "github__x",
		Arguments: map[string]any{"repo": "acme/x", "n": 5.0},
	}
	for _, tc := range []struct {
		src      string
		call     bool
		callErr  bool
		list     Result
		usesArgs bool
	}{
		{`"eng" in principal.groups`, true, false, True, false},
		{`principal.claims.dept == "r"`, true, false, True, false},
		{`principal.claims.nope == "r"`, false, true, Error, false},
		{`arguments.repo.startsWith("acme/")`, true, false, Unknown, true},
		{`arguments.n == 5 && arguments.n <= 5.0 && arguments.n > 4`, true, false, Unknown, true},
		{`arguments.nope == 1`, false, true, Unknown, true},
		{`principal.subject == "bob" && arguments.repo == "x"`, false, false, False, true},
		{`principal.subject == "alice" || arguments.repo == "x"`, true, false, True, true},
		// An error on one side and the arguments on the other: unknown.
		{`principal.claims.nope == "x" || arguments.repo == "acme/x"`, true, false, Unknown, true},
		{`principal.claims.nope == "x" && arguments.repo == "acme/x"`, false, true, Unknown, true},
		{`kind == "tool" && name.startsWith("github__") && route == "/mcp"`, true, false, True, false},
		// A loop too costly for the cost limit: an error for calls, and
		// Unknown (not Error) for lists, which cannot rely on it.
		{`[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))`, false, true, Unknown, false},
	} {
		c, err := Compile(tc.src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		got, err := c.Eval(in)
		if got != tc.call || (err != nil) != tc.callErr {
			t.Errorf("Eval(%s) = %v, %v; want %v, error %v", tc.src, got, err, tc.call, tc.callErr)
		}
		if res, err := c.EvalWithoutArguments(in); res != tc.list {
			t.Errorf("EvalWithoutArguments(%s) = %v (%v), want %v", tc.src, res, err, tc.list)
		}
		if c.UsesArguments() != tc.usesArgs {
			t.Errorf("UsesArguments(%s) = %v", tc.src, c.UsesArguments())
		}
	}
	// No arguments: an empty map, not an error for has().
	c, _ := Compile(`!has(arguments.x) && size(arguments) == 0`)
	if ok, err := c.Eval(Input{}); !ok || err != nil {
		t.Errorf("Eval without arguments = %v, %v", ok, err)
	}
	// Claims that are not JSON values: an error, whatever the arguments.
	c, _ = Compile(`true`)
	bad := Input{Principal: who.Principal{Claims: map[string]any{"f": func() {}}}}
	if _, err := c.Eval(bad); err == nil {
		t.Error("Eval with unconvertible claims succeeded")
	}
	if res, _ := c.EvalWithoutArguments(bad); res != Error {
		t.Errorf("EvalWithoutArguments with unconvertible claims = %v", res)
	}
	if Result(1).String() != "true" || Unknown.String() != "unknown" {
		t.Error("Result.String")
	}
}

// TestCostBound checks which conditions are evaluated without cost
// tracking, and that skipping it loses no bound: where the static
// estimate lets a condition go untracked, the cost CEL counts when
// tracking it stays within the estimate, and a principal with lists
// longer than the estimate assumed is judged by the tracked programs.
func TestCostBound(t *testing.T) {
	e, err := env()
	if err != nil {
		t.Fatal(err)
	}
	long := make([]string, maxPrincipalList+1)
	for i := range long {
		long[i] = fmt.Sprint("g", i)
	}
	long[maxPrincipalList] = "admins"
	base := Input{
		Principal: who.Principal{Subject: "alice", Groups: []string{"eng", "admins"}, Scopes: []string{"read"}, Claims: map[string]any{"tenant": "acme"}},
		Route:     "/mcp", Kind: "tool", Name: "github__x",
		Arguments: map[string]any{"limit": 10.0, "q": "Hello", "list": []any{1.0, 2.0}},
	}
	longGroups := base
	longGroups.Principal.Groups = long
	for _, tc := range []struct {
		src  string
		want bound
		in   Input
	}{
		{`principal.claims.?tenant.orValue("") == "acme"`, boundStatic, base},
		{`arguments.?limit.orValue(0) <= 100 && principal.subject != "blocked"`, boundStatic, base},
		{`arguments.q.startsWith("He") && name.startsWith("github__")`, boundStatic, base},
		{`"admins" in principal.groups`, boundLists, base},
		{`"admins" in principal.groups && "read" in principal.scopes`, boundLists, longGroups},
		{`arguments.q.lowerAscii() == "hello"`, boundTracked, base},     // a string function over an input
		{`arguments.q.contains("ell")`, boundTracked, base},             // cost grows with the input
		{`arguments.list.all(x, x > 0)`, boundTracked, base},            // a comprehension
		{`principal.groups.exists(g, g == "admins")`, boundLists, base}, // a loop over a list the estimate bounds
	} {
		c, err := Compile(tc.src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		if c.bound != tc.want {
			t.Errorf("%s: bound %d, want %d", tc.src, c.bound, tc.want)
		}
		ok, err := c.Eval(tc.in)
		if !ok || err != nil {
			t.Errorf("%s: Eval = %v, %v; want true", tc.src, ok, err)
		}
		full, _, err := c.programs(&tc.in)
		if err != nil {
			t.Fatal(err)
		}
		oversized := len(tc.in.Principal.Groups) > maxPrincipalList
		if tracked := full != c.full; tracked != (tc.want == boundLists && oversized) {
			t.Errorf("%s: tracked programs used = %v", tc.src, tracked)
		}
		if tc.want == boundTracked || oversized {
			continue
		}
		// What the tracker would have counted, against the estimate.
		ast, iss := e.Compile(tc.src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		prog, err := e.Program(ast, cel.EvalOptions(cel.OptTrackCost))
		if err != nil {
			t.Fatal(err)
		}
		vars, _ := tc.in.vars(true)
		_, det, err := prog.Eval(vars)
		if err != nil {
			t.Fatal(err)
		}
		est, _ := e.EstimateCost(ast, sizes{lists: tc.want == boundLists})
		if got := *det.ActualCost(); got > est.Max || est.Max > CostLimit {
			t.Errorf("%s: actual cost %d, estimate %d (limit %d)", tc.src, got, est.Max, CostLimit)
		}
	}
}

// TestPreparedClaims checks that prepared claims stand for the claims (and
// are used instead of them), with the same failure: claims that cannot be
// converted fail every condition, for calls and for lists.
func TestPreparedClaims(t *testing.T) {
	c, err := Compile(`principal.claims.dept == "r"`)
	if err != nil {
		t.Fatal(err)
	}
	prepared := who.NewClaims(map[string]any{"dept": "r"})
	for _, tc := range []struct {
		name string
		p    who.Principal
		call bool
		list Result
	}{
		{"prepared", who.Principal{PreparedClaims: prepared}, true, True},
		{"prepared wins over claims", who.Principal{Claims: map[string]any{"dept": "x"}, PreparedClaims: prepared}, true, True},
		{"claims alone", who.Principal{Claims: map[string]any{"dept": "r"}}, true, True},
		{"unconvertible prepared", who.Principal{PreparedClaims: who.NewClaims(map[string]any{"f": func() {}})}, false, Error},
	} {
		for range 2 { // the conversion is kept: the second use answers alike
			in := Input{Principal: tc.p}
			ok, err := c.Eval(in)
			if ok != tc.call || (err != nil) == tc.call {
				t.Errorf("%s: Eval = %v, %v", tc.name, ok, err)
			}
			if res, _ := c.EvalWithoutArguments(in); res != tc.list {
				t.Errorf("%s: EvalWithoutArguments = %v, want %v", tc.name, res, tc.list)
			}
		}
	}
}

// TestArgumentKeys checks what a condition is found to read of the call's
// arguments: named members, or the whole (then every member may matter).
func TestArgumentKeys(t *testing.T) {
	for _, tc := range []struct {
		src   string
		keys  []string
		whole bool
	}{
		{`"a" in principal.groups`, nil, false},
		{`arguments.repo.startsWith("acme/") && arguments.?limit.orValue(0) < 5`, []string{"repo", "limit"}, false},
		{`has(arguments.force) && arguments["dry run"] == true && arguments[?"x"].hasValue() && arguments.repo == "r"`, []string{"force", "dry run", "x", "repo"}, false},
		{`arguments.a.b == 1`, []string{"a"}, false}, // a nested member is read from the whole of a
		{`size(arguments) == 0`, nil, true},
		{`arguments == {}`, nil, true},
		{`"x" in arguments`, nil, true},
		{`arguments.exists(k, k == "x")`, nil, true},
		{`arguments[name] == 1`, nil, true},
		{`arguments.a == 1 && size(arguments) < 3`, nil, true},
	} {
		c, err := Compile(tc.src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		keys, whole := c.ArgumentKeys()
		if !slices.Equal(keys, tc.keys) || whole != tc.whole {
			t.Errorf("ArgumentKeys(%s) = %q, %v; want %q, %v", tc.src, keys, whole, tc.keys, tc.whole)
		}
	}
}

func TestUsesName(t *testing.T) {
	for src, want := range map[string]bool{
		`name.startsWith("fs__")`:                       true,
		`kind == "tool" && "admin" in principal.groups`: false,
		`principal.claims.?name.orValue("") == "x"`:     false, // a claim called name
		`arguments.name == "x"`:                         false,
	} {
		c, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if c.UsesName() != want {
			t.Errorf("UsesName(%s) = %v", src, !want)
		}
	}
}

// TestArgumentPaths: each chain of named selections on arguments, as deep
// as it goes, once.
func TestArgumentPaths(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string
	}{
		{`"a" in principal.groups`, `[]`},
		{`arguments.repo == "r" && arguments.?repo.orValue("") == "r"`, `[[repo]]`},
		{`has(arguments.opts.path) && arguments.opts["mode"] == "r"`, `[[opts path] [opts mode]]`},
		{`arguments.a.?b.c.orValue(1) == 1`, `[[a b c]]`},
		{`size(arguments) > 0 && arguments.items[0].name == "x"`, `[[items]]`},
	} {
		c, err := Compile(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if got := fmt.Sprint(c.ArgumentPaths()); got != tc.want {
			t.Errorf("%s: ArgumentPaths = %s, want %s", tc.src, got, tc.want)
		}
	}
}
