package client

import (
	"os/exec"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/sandbox"
)

// SandboxConfig confines a stdio child (internal/sandbox); nil runs it
// unconfined.
type SandboxConfig struct {
	Spec    sandbox.Spec
	Options sandbox.Options
	// Started, if set, learns each start's sandbox (for status and
	// metrics); Refused learns a start the sandbox could not apply.
	Started func(desc string)
	Refused func(err error)
	// Killed learns a child stopped by a sandbox limit, by its key
	// ("memory", "max_processes").
	Killed func(limit string)
	// DeniedLine learns a stderr line of the child that reports a
	// permission error: the kernel refuses the child's accesses without
	// telling the gateway, so what the child says is what can be counted.
	DeniedLine func(line string)
}

// deniedMarkers are how runtimes print EACCES and EPERM (node:
// "EACCES: permission denied, open ..."; Python: "PermissionError: [Errno
// 13] Permission denied"; libc's strerror).
var deniedMarkers = []string{"eacces", "eperm", "permission denied", "operation not permitted"}

// sandboxStderr passes a sandboxed child's stderr line reporting a
// permission error to DeniedLine.
func (s *Stdio) sandboxStderr(line string) {
	sc := s.cfg.Sandbox
	if sc == nil || sc.DeniedLine == nil {
		return
	}
	l := strings.ToLower(line)
	for _, m := range deniedMarkers {
		if strings.Contains(l, m) {
			sc.DeniedLine(line)
			return
		}
	}
}

// sandbox wraps cmd in the configured sandbox (a nil Run when there is
// none). A sandbox the kernel cannot apply fails the start: never an
// unconfined child in its place.
func (s *Stdio) sandbox(cmd *exec.Cmd) (*sandbox.Run, error) {
	sc := s.cfg.Sandbox
	if sc == nil {
		return nil, nil
	}
	run, err := sandbox.Wrap(cmd, sc.Spec, sc.Options)
	if err != nil {
		if sc.Refused != nil {
			sc.Refused(err)
		}
		return nil, err
	}
	s.log.Info("starting child in a sandbox", zap.String("sandbox", run.Describe()))
	if sc.Started != nil {
		sc.Started(run.Describe())
	}
	return run, nil
}

// sandboxExited releases a start's sandbox and explains a limit that
// stopped the child ("" when none did or there is no sandbox).
func (s *Stdio) sandboxExited(run *sandbox.Run) string {
	if run == nil {
		return ""
	}
	reason := run.Exited()
	if limit := run.KilledBy(); limit != "" && s.cfg.Sandbox.Killed != nil {
		s.cfg.Sandbox.Killed(limit)
	}
	return reason
}
