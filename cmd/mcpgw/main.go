// Command mcpgw is a Model Context Protocol gateway: one endpoint in front of
// many MCP servers. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/configs"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/demo"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/sandbox"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

const usage = `mcpgw — a Model Context Protocol gateway

Usage:
  mcpgw run [--config FILE]       serve (without --config: the embedded demo config); SIGHUP reloads FILE
  mcpgw stdio [--config FILE]     serve one route on stdin/stdout, for stdio-only MCP hosts
  mcpgw validate --config FILE    check a config; every problem is reported at once
  mcpgw policy explain ...        the policy decision for one principal and name, and why
  mcpgw catalog ...               what a principal would see of a recorded catalog
  mcpgw intercept test ...        what each interceptor would do to a tool result or arguments (dry run)
  mcpgw pin [--config FILE]       approve the upstreams' current tool definitions (pinning lock file)
  mcpgw tokens revoke ...         drop per-user upstream tokens (one principal's, or --all)
  mcpgw healthcheck [--url URL]   exit 0 when a running gateway's /readyz answers 200 (container HEALTHCHECK)
  mcpgw version                   print the version
  mcpgw demo-server               the built-in demo MCP server, on stdio

Run 'mcpgw COMMAND -h' for a command's flags.
`

func main() {
	// A sandboxed stdio child starts as this binary in launcher mode
	// (internal/sandbox); it never returns from there.
	sandbox.LauncherMain()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "stdio":
		return cmdStdio(args[1:], os.Stdin, stdout, stderr) // stdio.go
	case "policy":
		return cmdPolicy(args[1:], stdout, stderr) // policy.go
	case "catalog":
		return cmdCatalog(args[1:], stdout, stderr) // policy.go
	case "intercept":
		return cmdIntercept(args[1:], stdout, stderr) // intercept.go
	case "pin":
		return cmdPin(args[1:], stdout, stderr) // pin.go
	case "tokens":
		return cmdTokens(args[1:], stdout, stderr) // tokens.go
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "mcpgw %s\n", buildVersion())
		return 0
	case "healthcheck":
		return cmdHealthcheck(args[1:], stdout, stderr) // healthcheck.go
	case "demo-server":
		fs := newFlags("mcpgw demo-server")
		if code, ok := parseFlags(fs, args[1:], stdout, stderr); !ok {
			return code
		}
		if err := demo.ServeStdio(context.Background(), buildVersion()); err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintln(stderr, "demo-server:", err)
			return 1
		}
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "mcpgw: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// env resolves ${VAR} in configs: the process environment, plus
// MCPGW_EXECUTABLE (this binary), which the embedded default uses to run
// the demo upstream.
func env(name string) (string, bool) {
	if name == "MCPGW_EXECUTABLE" {
		if v, ok := os.LookupEnv(name); ok {
			return v, true
		}
		if exe, err := os.Executable(); err == nil {
			return exe, true
		}
	}
	return os.LookupEnv(name)
}

// loadConfig reads and validates a config: config's own checks and the
// policy section's globs and conditions (policy.CheckConfig), all at once.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Parse("(embedded default config)", configs.Default, env, policy.CheckConfig)
	}
	return config.Load(path, env, policy.CheckConfig)
}

// watchFile polls path's modification time and size every interval and
// signals on the returned channel when either changed (a rename over the
// file, as editors and Kubernetes ConfigMap updates do, changes them too).
// A missing file is not a change: the next write is. It stops with stop.
func watchFile(path string, interval time.Duration, stop <-chan struct{}) <-chan struct{} {
	out := make(chan struct{}, 1)
	type stamp struct {
		mod  time.Time
		size int64
	}
	read := func() (stamp, bool) {
		fi, err := os.Stat(path)
		if err != nil {
			return stamp{}, false
		}
		return stamp{fi.ModTime(), fi.Size()}, true
	}
	last, _ := read()
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			now, ok := read()
			if !ok || now == last {
				continue
			}
			last = now
			select {
			case out <- struct{}{}:
			default: // a reload is already due
			}
		}
	}()
	return out
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcpgw validate --config FILE")
	path := fs.String("config", "", "config `FILE` to check")
	fs.StringVar(path, "c", "", "shorthand for --config")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *path == "" {
		fmt.Fprintln(stderr, "mcpgw validate: --config FILE is required")
		return 2
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// What run would refuse at start, for the files the config names.
	if ps := startChecks(cfg); len(ps) > 0 { // startcheck.go
		for _, p := range ps {
			fmt.Fprintf(stderr, "%s: %s\n", *path, p)
		}
		return 1
	}
	for _, w := range envWarnings(cfg, os.Environ()) { // envwarn.go
		fmt.Fprintln(stderr, "warning:", w)
	}
	fmt.Fprintln(stdout, cfg.Summary())
	// Warnings do not fail validation: the config is valid as written.
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return 0
}

// overrideAdminListen applies --admin-listen: only the address changes, so
// the file's admin.token_file, allowed_hosts and pprof still apply (a flag
// that dropped the token would open /status/* without anyone noticing).
func overrideAdminListen(cfg *config.Config, addr string) {
	if cfg.Admin == nil {
		cfg.Admin = &config.Admin{}
	}
	cfg.Admin.Listen = addr
}

// logFormatHelp is the --log-format flag's help.
const logFormatHelp = "log format: auto (json when stderr is not a terminal, console on one), json or console"

// newLogger builds the process logger on w. Format "auto" is JSON unless w
// is a terminal: a person at a terminal reads console lines, while a
// container runtime, systemd or a pipe feeds a log shipper that wants one
// JSON object a line. Either way, as zap's production config does, lines
// carry their caller and errors a stack trace.
func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "console"
		}
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format %q: use auto, json or console", format)
	}
	// Errors are an operator's (a port in use, a failed reload, an upstream
	// crash-looping): one line that says what and the fix. A stack trace is
	// for a programming error (DPanic) alone.
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl), zap.AddCaller(), zap.AddStacktrace(zapcore.DPanicLevel)), nil
}

// isTerminal reports whether w is a terminal (a character device: a tty;
// files, pipes and sockets are not).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && st.Mode()&os.ModeDevice != 0
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("mcpgw run [--config FILE] [flags]")
	path := fs.String("config", "", "config `FILE` (default: the embedded demo config)")
	fs.StringVar(path, "c", "", "shorthand for --config")
	logFormat := fs.String("log-format", "auto", logFormatHelp)
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	drain := fs.Duration("drain-timeout", 10*time.Second, "how long in-flight requests may finish on SIGTERM")
	delay := fs.Duration("shutdown-delay", 0, "on SIGTERM, how long to keep serving after /readyz turns 503 (e.g. 5s behind a load balancer), before draining")
	listen := fs.String("listen", "", "serve MCP on this `ADDR` (overrides listen:; the embedded default config also reads $MCPGW_LISTEN)")
	adminListen := fs.String("admin-listen", "", "serve /metrics, /healthz and /readyz on this `ADDR` (overrides admin.listen; the admin listener is off unless one of them is set)")
	watch := fs.Bool("watch", false, "reload the config when --config FILE changes (checked every second); SIGHUP always reloads")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	log, err := newLogger(*logFormat, *logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw run:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	useRedisLogger(log)

	load := func() (*config.Config, error) {
		cfg, err := loadConfig(*path)
		if err == nil && *listen != "" {
			cfg.Listen = *listen
		}
		if err == nil && *adminListen != "" {
			overrideAdminListen(cfg, *adminListen)
		}
		return cfg, err
	}
	cfg, err := load()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *watch && *path == "" {
		fmt.Fprintln(stderr, "mcpgw run: --watch needs --config FILE (the embedded default config cannot change)")
		return 2
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: log, Version: buildVersion(), ShutdownDelay: *delay, StateDir: config.StateDir(os.LookupEnv)})
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	for _, r := range cfg.Routes {
		log.Info("serving MCP", zap.String("url", fmt.Sprintf("http://%s%s", gw.Addr(), r.Path)), zap.Strings("upstreams", cfg.RouteUpstreams(r)))
	}

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var changed <-chan struct{}
	if *watch {
		stop := make(chan struct{})
		defer close(stop)
		changed = watchFile(*path, time.Second, stop)
		log.Info("watching the config file; it is reloaded when it changes", zap.String("config", *path))
	}
	reload := func(trigger string) {
		if *path == "" {
			log.Warn("config reload ignored: mcpgw runs the embedded default config, which cannot change; start it with --config FILE to reload", zap.String("trigger", trigger))
			return
		}
		log.Info("reloading config", zap.String("config", *path), zap.String("trigger", trigger))
		_ = gw.ReloadFrom(*path, load) // logs its own outcome, one line
	}
wait:
	for {
		select {
		case s := <-sig:
			log.Info("shutting down", zap.String("signal", s.String()), zap.Duration("drain_timeout", *drain))
			break wait
		case <-hup:
			reload("SIGHUP")
		case <-changed:
			reload("file changed")
		case err := <-gw.Err():
			log.Error("listener failed", zap.Error(err))
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *delay+*drain)
	defer cancel()
	go func() { // a second signal means now
		<-sig
		log.Warn("second signal: exiting at once")
		os.Exit(1)
	}()
	if err := gw.Shutdown(ctx); err != nil {
		log.Warn("drain timed out; open requests were cut", zap.Error(err))
	}
	log.Info("stopped")
	return 0
}
