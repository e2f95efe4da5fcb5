//go:build !linux

package sandbox

import (
	"fmt"
	"os/exec"
)

// Run is one sandboxed start of a child (Linux only).
type Run struct{ desc string }

// Wrap refuses: sandboxing is built on Linux namespaces and Landlock.
func Wrap(_ *exec.Cmd, spec Spec, _ Options) (*Run, error) {
	return nil, fmt.Errorf("%w: upstream %q: sandboxing needs Linux (user namespaces, Landlock); remove sandbox", ErrUnsupported, spec.Upstream)
}

// Exited does nothing off Linux.
func (r *Run) Exited() string { return "" }

// LauncherMain does nothing off Linux.
func LauncherMain() {}

// KilledBy is always "" off Linux.
func (r *Run) KilledBy() string { return "" }

// Started does nothing off Linux.
func (r *Run) Started() {}
