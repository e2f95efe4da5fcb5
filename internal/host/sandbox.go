package host

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/sandbox"
)

// sandboxConfig is the confinement of the upstream's children (nil: none
// configured). Sizes were validated with the config.
func (u *Upstream) sandboxConfig() *client.SandboxConfig {
	s := u.cfg.Sandbox
	if s == nil {
		return nil
	}
	mem, _ := config.ParseBytes(s.Memory)
	tmp, _ := config.ParseBytes(s.Tmp)
	return &client.SandboxConfig{
		Spec: sandbox.Spec{
			Upstream: u.name, Runtime: s.Runtime, ReadOnly: s.ReadOnly, ReadWrite: s.ReadWrite,
			Network: s.Network, MemoryBytes: mem, CPUs: s.CPUs, MaxProcesses: s.MaxProcesses,
			MaxOpenFiles: s.MaxOpenFiles, TmpBytes: tmp,
			Egress: s.Egress, EgressMaxTunnels: s.EgressMaxTunnels,
		},
		Options: sandbox.Options{Launcher: u.host.opts.SandboxLauncher, Egress: sandbox.EgressHooks{
			Result: u.m.SandboxEgress,
			Bytes:  u.m.SandboxEgressBytes,
			Open:   u.m.SandboxEgressOpen,
			Denied: u.egressDeniedTo,
		}},
		Started: func(desc string) {
			u.sandboxDesc.Store(&desc)
			u.m.SandboxEvent(metrics.SandboxStarted)
		},
		Refused: func(error) { u.m.SandboxEvent(metrics.SandboxRefused) },
		DeniedLine: func(string) {
			u.sandboxDenials.Add(1)
			u.m.SandboxEvent(metrics.SandboxDeniedReported)
		},
		Killed: func(limit string) {
			u.sandboxKills.Add(1)
			u.m.SandboxEvent(metrics.SandboxKilled(limit))
		},
	}
}

// egressDeniedTo records a host:port the egress proxy refused: counted
// for status, logged at most once a second (a child retrying in a loop
// must not flood the log; the count says how many).
func (u *Upstream) egressDeniedTo(target string) {
	n := u.egressDenied.Add(1)
	u.egressLast.Store(&target)
	if skipped, ok := u.egressLog.allow(time.Now()); ok {
		u.log.Warn("sandbox egress refused: host not listed in sandbox.egress",
			zap.String("target", target), zap.Int64("denied_total", n), zap.Int64("not_logged", skipped))
	}
}

// sandboxStatus is the sandbox the last child started in (with what its
// egress proxy refused) and how many children a limit killed.
func (u *Upstream) sandboxStatus() (string, int64) {
	d := u.sandboxDesc.Load()
	if d == nil {
		return "", u.sandboxKills.Load()
	}
	desc := *d
	if n := u.sandboxDenials.Load(); n > 0 {
		desc += fmt.Sprintf(" denials_reported=%d", n)
	}
	if n := u.egressDenied.Load(); n > 0 {
		last := ""
		if l := u.egressLast.Load(); l != nil {
			last = *l
		}
		desc += fmt.Sprintf(" egress_denied=%d (last %s)", n, last)
	}
	return desc, u.sandboxKills.Load()
}
