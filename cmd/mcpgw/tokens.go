package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mcpgw/mcpgw/internal/gateway"
)

const tokensUsage = `Usage:
  mcpgw tokens revoke --config FILE --upstream NAME (--principal PRINCIPAL | --all)

Drops per-user upstream tokens (upstreams.NAME.auth.per_user) from the
token store the config names: one principal's, written as the gateway logs
it (SUB@ISSUER, e.g. alice@https://login.example.com/, or apikey:NAME), or
with --all every principal's. A running gateway sees the change on its next
request; the user is asked to authorize again.
`

func cmdTokens(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "revoke" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, tokensUsage)
			return 0
		}
		fmt.Fprint(stderr, tokensUsage)
		return exitUsage
	}
	fs := newFlags("mcpgw tokens revoke --config FILE --upstream NAME (--principal PRINCIPAL | --all)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), tokensUsage+"\nFlags:\n"); printFlags(fs) }
	path := fs.String("config", "", "config `FILE`")
	fs.StringVar(path, "c", "", "shorthand for --config")
	upstream := fs.String("upstream", "", "the upstream `NAME` (with auth.per_user)")
	principal := fs.String("principal", "", "revoke this `PRINCIPAL`'s token (SUB@ISSUER or apikey:NAME)")
	all := fs.Bool("all", false, "revoke every principal's token for the upstream")
	if code, ok := parseFlags(fs, args[1:], stdout, stderr); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "mcpgw tokens revoke: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	case *path == "" || *upstream == "":
		fmt.Fprintln(stderr, "mcpgw tokens revoke: --config and --upstream are required")
		return exitUsage
	case (*principal == "") == !*all:
		fmt.Fprintln(stderr, "mcpgw tokens revoke: give exactly one of --principal PRINCIPAL and --all")
		return exitUsage
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := gateway.RevokeTokens(ctx, cfg, *upstream, *principal, *all)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgw tokens revoke: %v\n", err)
		return exitError
	}
	if n == 0 && !*all {
		fmt.Fprintf(stdout, "no token of %s for upstream %s (nothing revoked)\n", *principal, *upstream)
		return 0
	}
	fmt.Fprintf(stdout, "revoked %d token(s) for upstream %s\n", n, *upstream)
	return 0
}
