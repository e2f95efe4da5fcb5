package config

import (
	"fmt"
	"math"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// Sandbox confines a stdio child to what the operator grants
// (internal/sandbox; docs/sandbox.md): the paths listed, no network,
// resource limits, no privileges, a private /tmp. Linux only; a sandbox
// the kernel cannot apply fails the child's start, never runs it
// unconfined.
type Sandbox struct {
	// Runtime grants what the interpreter needs: node, python or binary.
	// Default: from the command (node, npx → node; python*, uv, uvx →
	// python; anything else → binary).
	Runtime string `yaml:"runtime"`
	// ReadOnly and ReadWrite are the absolute paths granted.
	ReadOnly  []string `yaml:"read_only"`
	ReadWrite []string `yaml:"read_write"`
	// Network is "none" (no network at all) or "egress" (only the hosts
	// in Egress, through the gateway's proxy). Default: egress when
	// Egress lists hosts, else none.
	Network string `yaml:"network"`
	// Egress lists the host:port pairs an egress child may reach.
	Egress []string `yaml:"egress"`
	// EgressMaxTunnels bounds the child's open proxy connections.
	EgressMaxTunnels int `yaml:"egress_max_tunnels"`
	// Memory limits the child's memory, e.g. 512MiB ("" = no limit).
	Memory string `yaml:"memory"`
	// CPUs limits CPU time in cores, e.g. 0.5 (0 = no limit).
	CPUs float64 `yaml:"cpus"`
	// MaxProcesses bounds the child's processes and threads.
	MaxProcesses int `yaml:"max_processes"`
	// MaxOpenFiles bounds its open file descriptors.
	MaxOpenFiles int `yaml:"max_open_files"`
	// Tmp sizes the private /tmp.
	Tmp string `yaml:"tmp"`
}

// Sandbox defaults and bounds.
const (
	SandboxNetworkNone         = "none"
	SandboxNetworkEgress       = "egress"
	DefaultSandboxEgressMax    = 32  // open proxy connections per child
	DefaultSandboxMaxProcesses = 256 // threads count: node runs ~11
	DefaultSandboxMaxOpenFiles = 1024
	DefaultSandboxTmp          = "64MiB"
	MinSandboxMemory           = 16 << 20
	MinSandboxMaxOpenFiles     = 16
)

// SandboxRuntimes are the values of sandbox.runtime.
var SandboxRuntimes = []string{"node", "python", "binary"}

// SandboxRuntimeFor is the runtime a command gets by default.
func SandboxRuntimeFor(argv []string) string {
	if len(argv) == 0 {
		return "binary"
	}
	switch base := path.Base(argv[0]); {
	case base == "node" || base == "nodejs" || base == "npx":
		return "node"
	case strings.HasPrefix(base, "python") || base == "uv" || base == "uvx":
		return "python"
	}
	return "binary"
}

// ParseBytes reads a size: a number of bytes, or one with a KiB, MiB or
// GiB suffix.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(t, suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, suf)), m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * mult, nil
}

// sandboxDefaults fills a sandbox's unset keys.
func sandboxDefaults(p string, u *Upstream, d *strictyaml.Decoder) {
	s := u.Sandbox
	if s == nil {
		return
	}
	sp := strictyaml.JoinPath(p, "sandbox")
	if !d.Set(strictyaml.JoinPath(sp, "runtime")) {
		s.Runtime = SandboxRuntimeFor(u.Command)
	}
	if !d.Set(strictyaml.JoinPath(sp, "network")) {
		s.Network = SandboxNetworkNone
		if len(s.Egress) > 0 {
			s.Network = SandboxNetworkEgress
		}
	}
	if !d.Set(strictyaml.JoinPath(sp, "egress_max_tunnels")) {
		s.EgressMaxTunnels = DefaultSandboxEgressMax
	}
	if !d.Set(strictyaml.JoinPath(sp, "max_processes")) {
		s.MaxProcesses = DefaultSandboxMaxProcesses
	}
	if !d.Set(strictyaml.JoinPath(sp, "max_open_files")) {
		s.MaxOpenFiles = DefaultSandboxMaxOpenFiles
	}
	if !d.Set(strictyaml.JoinPath(sp, "tmp")) {
		s.Tmp = DefaultSandboxTmp
	}
}

// sandbox validates upstreams.NAME.sandbox.
func (v *validator) sandbox(p string, u *Upstream, hasURL bool) {
	s := u.Sandbox
	if s == nil {
		return
	}
	sp := strictyaml.JoinPath(p, "sandbox")
	if hasURL {
		v.add(sp, "sandbox applies only to command upstreams (a stdio child the gateway starts); remove it")
		return
	}
	if !slices.Contains(SandboxRuntimes, s.Runtime) {
		v.add(strictyaml.JoinPath(sp, "runtime"), fmt.Sprintf("%q is not a runtime; use one of %s, or remove it to pick one from the command", s.Runtime, strings.Join(SandboxRuntimes, ", ")))
	}
	switch s.Network {
	case SandboxNetworkNone:
		if len(s.Egress) > 0 {
			v.add(strictyaml.JoinPath(sp, "egress"), "hosts listed but network is none; set network: egress, or remove egress")
		}
	case SandboxNetworkEgress:
		if len(s.Egress) == 0 {
			v.add(strictyaml.JoinPath(sp, "egress"), "network egress needs the host:port pairs the child may reach; list them, or use network: none")
		}
	default:
		v.add(strictyaml.JoinPath(sp, "network"), fmt.Sprintf("%q is not a network mode; use none or egress", s.Network))
	}
	for i, e := range s.Egress {
		if msg := egressEntryProblem(e); msg != "" {
			v.add(fmt.Sprintf("%s[%d]", strictyaml.JoinPath(sp, "egress"), i), msg)
		}
	}
	if s.EgressMaxTunnels < 1 {
		v.add(strictyaml.JoinPath(sp, "egress_max_tunnels"), fmt.Sprintf("must be at least 1; remove it for the default (%d)", DefaultSandboxEgressMax))
	}
	for key, paths := range map[string][]string{"read_only": s.ReadOnly, "read_write": s.ReadWrite} {
		for i, g := range paths {
			gp := fmt.Sprintf("%s[%d]", strictyaml.JoinPath(sp, key), i)
			switch c := filepath.Clean(g); {
			case !filepath.IsAbs(g):
				v.add(gp, fmt.Sprintf("%q is not an absolute path; write it from /", g))
			case c == "/":
				v.add(gp, "grants the whole filesystem; name the directories the server needs")
			case c == "/tmp" || strings.HasPrefix(c, "/tmp/"):
				v.add(gp, fmt.Sprintf("%s is under /tmp, which the sandbox replaces with a private one; use a directory elsewhere", g))
			}
		}
	}
	if s.Memory != "" {
		if n, err := ParseBytes(s.Memory); err != nil || n < MinSandboxMemory {
			v.add(strictyaml.JoinPath(sp, "memory"), fmt.Sprintf("%q is not a size of at least 16MiB; write e.g. 512MiB, or remove it for no limit", s.Memory))
		}
	}
	if s.CPUs < 0 || (s.CPUs > 0 && s.CPUs < 0.01) {
		v.add(strictyaml.JoinPath(sp, "cpus"), "must be at least 0.01 cores; remove it for no limit")
	}
	if s.MaxProcesses < 1 {
		v.add(strictyaml.JoinPath(sp, "max_processes"), fmt.Sprintf("must be at least 1; remove it for the default (%d)", DefaultSandboxMaxProcesses))
	}
	if s.MaxOpenFiles < MinSandboxMaxOpenFiles {
		v.add(strictyaml.JoinPath(sp, "max_open_files"), fmt.Sprintf("must be at least %d; remove it for the default (%d)", MinSandboxMaxOpenFiles, DefaultSandboxMaxOpenFiles))
	}
	if n, err := ParseBytes(s.Tmp); err != nil || n < 1<<20 {
		v.add(strictyaml.JoinPath(sp, "tmp"), fmt.Sprintf("%q is not a size of at least 1MiB; write e.g. 64MiB, or remove it for the default (%s)", s.Tmp, DefaultSandboxTmp))
	}
}

// egressEntryProblem says what is wrong with a sandbox.egress entry
// ("" if nothing): a host name or IP address, and a port.
func egressEntryProblem(e string) string {
	host, port, err := net.SplitHostPort(e)
	if err != nil || host == "" {
		return fmt.Sprintf("%q is not host:port; write e.g. api.example.com:443", e)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Sprintf("%q: port %q is not a number from 1 to 65535; write host:port, e.g. api.example.com:443", e, port)
	}
	if net.ParseIP(host) != nil {
		return ""
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Sprintf("%q: %q is not a host name (no wildcards or URLs; list each host:port)", e, host)
		}
	}
	return ""
}
