package host

import (
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
		},
		Options: sandbox.Options{Launcher: u.host.opts.SandboxLauncher},
		Started: func(desc string) {
			u.sandboxDesc.Store(&desc)
			u.m.SandboxEvent(metrics.SandboxStarted)
		},
		Refused: func(error) { u.m.SandboxEvent(metrics.SandboxRefused) },
		Killed: func(limit string) {
			u.sandboxKills.Add(1)
			u.m.SandboxEvent(metrics.SandboxKilled(limit))
		},
	}
}

// sandboxStatus is the sandbox the last child started in and how many
// children a limit killed.
func (u *Upstream) sandboxStatus() (string, int64) {
	if d := u.sandboxDesc.Load(); d != nil {
		return *d, u.sandboxKills.Load()
	}
	return "", u.sandboxKills.Load()
}
