package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// newFlags returns a flag set for one subcommand whose help is written in
// the --flag spelling the rest of the docs use. synopsis is the line after
// "Usage:", e.g. "mcpgw run [--config FILE]".
func newFlags(synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(synopsis, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  %s\n\nFlags:\n", synopsis)
		printFlags(fs)
	}
	return fs
}

// printFlags lists fs's flags on its output, one a line, as --name.
func printFlags(fs *flag.FlagSet) {
	out := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		dashes := "--"
		if len(f.Name) == 1 {
			dashes = "-"
		}
		line := "  " + dashes + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(out, "%-28s %s", line, strings.ReplaceAll(usage, "\n", "\n"+strings.Repeat(" ", 29)))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(out, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(out)
	})
}

// parseFlags parses args. Asked for help (-h, --help), it prints the
// usage on stdout and reports exit code 0, as users and scripts expect of
// a help request; a bad flag prints the error and the usage on stderr and
// reports exitUsage. ok is true when the command should go on.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(buf.Bytes())
		return 0, false
	case err != nil:
		_, _ = stderr.Write(buf.Bytes())
		return exitUsage, false
	}
	return 0, true
}
