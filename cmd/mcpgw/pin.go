package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

const pinUsage = `Usage:
  mcpgw pin [--config FILE] [--out FILE] [--upstream NAME]... [--timeout 60s]

Starts the configured upstreams (no listener), lists every upstream's tools
and writes the pinning lock file that approves their current definitions:
to --out, or else to policy.pinning.lock_file. A tool the interceptors'
list phase hides on every route that has its upstream is left out (and
named on stderr with the interceptor that hid it); a flagged one is
approved, as it is served. Prints one line per upstream (with what
changed against the lock file it replaces, by tool name). Nothing
is written, and the exit status is 1, when an upstream cannot be listed,
since its approvals would otherwise be dropped. With --upstream, only the
named upstreams are started and pinned again; every other upstream's
approvals are kept as the replaced lock had them, so one upstream that is
down does not block approving another. Review the diff of the lock file
before deploying it: it is what enforce mode trusts.
`

func cmdPin(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcpgw pin [--config FILE] [flags]")
	fs.Usage = func() { fmt.Fprint(fs.Output(), pinUsage+"\nFlags:\n"); printFlags(fs) }
	path := fs.String("config", "", "config `FILE` (default: the embedded demo config)")
	fs.StringVar(path, "c", "", "shorthand for --config")
	out := fs.String("out", "", "write the lock to `FILE` (default: policy.pinning.lock_file)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long starting and listing every upstream may take")
	logLevel := fs.String("log-level", "warn", "log level of the upstreams' supervision (on stderr)")
	var only []string
	fs.Func("upstream", "pin only upstream `NAME` (repeatable); the others keep their approvals from the replaced lock", func(v string) error {
		only = append(only, v)
		return nil
	})
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw pin: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	dest := *out
	if dest == "" && cfg.Policy != nil && cfg.Policy.Pinning != nil {
		dest = cfg.Policy.Pinning.LockFile
	}
	if dest == "" {
		fmt.Fprintln(stderr, "mcpgw pin: nowhere to write the lock file; give --out FILE, or set policy.pinning.lock_file in the config")
		return exitUsage
	}
	if len(only) > 0 {
		picked := map[string]*config.Upstream{}
		for _, name := range only {
			u, ok := cfg.Upstreams[name]
			if !ok {
				fmt.Fprintf(stderr, "mcpgw pin: --upstream %q: the config has no such upstream (upstreams: %s)\n", name, strings.Join(slices.Sorted(maps.Keys(cfg.Upstreams)), ", "))
				return exitUsage
			}
			picked[name] = u
		}
		restricted := *cfg
		restricted.Upstreams = picked // start only these
		cfg = &restricted
	}
	log, err := newLogger("auto", *logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw pin:", err)
		return exitUsage
	}
	defer func() { _ = log.Sync() }()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	old, _ := policy.LoadLock(dest) // for the summary (and --upstream); a missing or bad lock is replaced
	lock := policy.NewLock()
	if len(only) > 0 && old != nil {
		for name, u := range old.Upstreams {
			if !slices.Contains(only, name) {
				lock.Upstreams[name] = u
			}
		}
	}
	// The upstreams are started, listed at once and stopped again before
	// anything is written to stderr: their supervisors log retries there
	// meanwhile (a race on the writer, and noise).
	results, err := gateway.ListTools(ctx, cfg, gateway.Options{Logger: log, Version: buildVersion()})
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw pin:", err)
		return exitError
	}
	failed := 0
	var listed []string
	for _, r := range results {
		name, tools, err := r.Name, r.Tools, r.Err
		if err != nil {
			failed++
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (it did not answer within --timeout %s)", err, *timeout)
			}
			fmt.Fprintf(stdout, "%s: FAILED: %v\n", name, err)
			continue
		}
		listed = append(listed, name)
		if err := lock.AddTools(name, rawjson.AppendArray(nil, tools)); err != nil {
			failed++
			fmt.Fprintf(stdout, "%s: FAILED: %v\n", name, err)
			continue
		}
		fmt.Fprintf(stdout, "%s: %s%s\n", name, plural(len(lock.Tools(name)), "tool"), lockChanges(old, lock, name))
		for _, h := range r.Hidden {
			fmt.Fprintf(stderr, "mcpgw pin: %s: left out tool %q, which the interceptors' list phase hides on every route that has %s (%s); no caller is shown it, so it is not approved\n",
				name, h.Name, name, h.By)
		}
	}
	if failed > 0 {
		hint := "fix or remove them, then run mcpgw pin again"
		if len(listed) > 0 {
			hint += "; or pin the others alone, keeping the failed ones' approvals: mcpgw pin --upstream " + strings.Join(listed, " --upstream ")
		}
		fmt.Fprintf(stderr, "mcpgw pin: %d of %d upstreams could not be listed; %s was not written (%s)\n",
			failed, len(results), dest, hint)
		return exitError
	}
	if err := writeFileAtomic(dest, lock.Marshal()); err != nil {
		fmt.Fprintln(stderr, "mcpgw pin:", err)
		return exitError
	}
	fmt.Fprintf(stdout, "wrote %s\n", dest)
	return 0
}

// lockChanges describes what the new lock changes for upstream against the
// old one, by tool name: " (1 new: add; 1 changed: echo; 1 removed: gone)",
// " (unchanged)", or "" when there was no old lock.
func lockChanges(old, cur *policy.Lock, upstream string) string {
	if old == nil {
		return ""
	}
	var was, now map[string]string
	if u := old.Upstreams[upstream]; u != nil {
		was = u.Tools
	}
	if u := cur.Upstreams[upstream]; u != nil {
		now = u.Tools
	}
	var added, changed, removed []string
	for name, h := range now {
		switch prev, ok := was[name]; {
		case !ok:
			added = append(added, name)
		case prev != h:
			changed = append(changed, name)
		}
	}
	for name := range was {
		if _, ok := now[name]; !ok {
			removed = append(removed, name)
		}
	}
	var parts []string
	for _, p := range []struct {
		names []string
		what  string
	}{{added, "new"}, {changed, "changed"}, {removed, "removed"}} {
		if len(p.names) > 0 {
			slices.Sort(p.names)
			parts = append(parts, fmt.Sprintf("%d %s: %s", len(p.names), p.what, strings.Join(p.names, ", ")))
		}
	}
	if len(parts) == 0 {
		return " (unchanged)"
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// writeFileAtomic replaces path with data through a temporary file in the
// same directory, so that a gateway reading the lock never sees half of it.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot write %s: directory %s does not exist; create it or choose another --out", path, dir)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644) // not a secret: reviewed, committed, deployed
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
