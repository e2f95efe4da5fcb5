package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/gateway"
)

// cmdStdio serves the merged catalog of one route over stdin/stdout, for
// MCP hosts that only launch stdio servers. stdout carries the protocol
// alone: every log line goes to stderr.
func cmdStdio(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("mcpgw stdio [--config FILE] [--route PATH]")
	path := fs.String("config", "", "config `FILE` (default: the embedded demo config)")
	fs.StringVar(path, "c", "", "shorthand for --config")
	route := fs.String("route", "", "the route `PATH` to serve (default: the first route)")
	logFormat := fs.String("log-format", "auto", logFormatHelp+" (written to stderr)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpgw stdio: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	log, err := newLogger(*logFormat, *logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "mcpgw stdio:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()

	cfg, err := loadConfig(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// A signal ends the session (cancelling what is in flight) and stops
	// the upstreams; a second one exits at once (default handling).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	err = gateway.ServeStdio(ctx, cfg, gateway.Options{Logger: log, Version: buildVersion()}, *route, stdin, stdout)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		log.Info("stopped by signal")
		return 0
	}
	log.Error("stdio session failed", zap.Error(err))
	return 1
}
