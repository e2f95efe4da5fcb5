// Package sandbox confines a stdio child to what the operator granted:
// the paths listed (Landlock), no network (an empty network namespace),
// memory, CPU and process limits (cgroup v1 where the gateway may write
// it, else rlimits), no new privileges, no capabilities, an unprivileged
// user (a fresh user namespace; as root, mapped to nobody) and a private
// /tmp.
//
// The gateway cannot apply these between fork and exec from Go, so the
// child is started as the gateway's own binary in a hidden launcher mode
// (Wrap rewrites the exec.Cmd): the launcher, already inside the new
// namespaces, joins its cgroups, mounts /tmp, sets rlimits, restricts
// itself with Landlock, drops every capability and execs the server.
// What the kernel cannot do is refused at Wrap, never skipped: a child is
// sandboxed as configured or not started.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Spec is one upstream's sandbox, as configured.
type Spec struct {
	// Upstream names the upstream, in messages and cgroup names.
	Upstream string
	// Runtime grants what an interpreter needs: "node", "python" or
	// "binary" (only the command itself and the system libraries).
	Runtime string
	// ReadOnly and ReadWrite are the paths granted beyond the runtime's.
	ReadOnly  []string
	ReadWrite []string
	// Network is "none": an empty network namespace, plus Landlock's TCP
	// rules where the kernel has them; or "egress": that namespace with
	// one way out, the gateway's proxy (egress.go), to the Egress list.
	Network string
	// Egress lists the host:port pairs an "egress" child may reach.
	Egress []string
	// EgressMaxTunnels bounds its open proxy connections (0: the default).
	EgressMaxTunnels int
	// MemoryBytes, CPUs, MaxProcesses and MaxOpenFiles are limits; 0 is
	// no limit (MaxOpenFiles 0 keeps the gateway's).
	MemoryBytes  int64
	CPUs         float64
	MaxProcesses int
	MaxOpenFiles int
	// TmpBytes sizes the private /tmp (a tmpfs).
	TmpBytes int64
}

// Options are the gateway's side of sandboxing.
type Options struct {
	// Launcher is the binary that runs the launcher mode (LauncherMain);
	// "" is the running executable.
	Launcher string
	// CgroupRoot is where the cgroup v1 hierarchies are mounted
	// ("" is /sys/fs/cgroup).
	CgroupRoot string
	// Egress dials for and counts the egress proxy (Network "egress").
	Egress EgressHooks
}

// Plan is what the launcher applies, passed to it as JSON on its argv
// (nothing secret: paths and numbers).
type Plan struct {
	Target       string   `json:"target"`
	Argv         []string `json:"argv"`
	ReadOnly     []string `json:"ro"`
	ReadWrite    []string `json:"rw"`
	Files        []string `json:"files"` // device files granted read-write
	NoNetwork    bool     `json:"no_network"`
	EgressFD     int      `json:"egress_fd"` // >0: make the proxy socket, send it on this fd
	CgroupProcs  []string `json:"cgroup_procs"`
	RlimitData   int64    `json:"rlimit_data"`
	RlimitNproc  int      `json:"rlimit_nproc"`
	RlimitNofile int      `json:"rlimit_nofile"`
	TmpBytes     int64    `json:"tmp_bytes"`
}

// Marker is argv[1] of the launcher mode.
const Marker = "__mcpgw-sandbox-exec"

// ErrUnsupported wraps every refusal for a missing kernel feature.
var ErrUnsupported = errors.New("sandbox not supported here")

// Runtimes are the values of Spec.Runtime.
var Runtimes = []string{"node", "python", "binary"}

// NetworkModes are the values of Spec.Network.
var NetworkModes = []string{"none", "egress"}

// Describe is a one-line account of the sandbox, for logs and status.
func (r *Run) Describe() string { return r.desc }

func describe(s Spec, memMode, cpuMode, procMode string) string {
	var b strings.Builder
	network := s.Network
	if network == "egress" {
		network = fmt.Sprintf("egress(%d hosts)", len(s.Egress))
	}
	fmt.Fprintf(&b, "runtime=%s network=%s fs=landlock ro=%d rw=%d", s.Runtime, network, len(s.ReadOnly), len(s.ReadWrite))
	if s.MemoryBytes > 0 {
		fmt.Fprintf(&b, " memory=%dMiB(%s)", s.MemoryBytes>>20, memMode)
	}
	if s.CPUs > 0 {
		fmt.Fprintf(&b, " cpus=%g(%s)", s.CPUs, cpuMode)
	}
	if s.MaxProcesses > 0 {
		fmt.Fprintf(&b, " max_processes=%d(%s)", s.MaxProcesses, procMode)
	}
	if s.MaxOpenFiles > 0 {
		fmt.Fprintf(&b, " max_open_files=%d", s.MaxOpenFiles)
	}
	return b.String()
}

// runtimePaths are the read-only grants a runtime preset adds: the
// resolved install prefix of the interpreter, and the package directory
// (the outermost node_modules, or the file's directory) of every
// absolute path on the command line.
func runtimePaths(s Spec, target string, argv []string) ([]string, error) {
	var out []string
	switch s.Runtime {
	case "node", "python":
		real, err := filepath.EvalSymlinks(target)
		if err != nil {
			return nil, fmt.Errorf("sandbox: runtime %s: resolve %s: %w", s.Runtime, target, err)
		}
		// /usr/bin/node -> /usr; /opt/node-v22/bin/node -> /opt/node-v22.
		out = append(out, filepath.Dir(filepath.Dir(real)))
	case "binary":
		real, err := filepath.EvalSymlinks(target)
		if err != nil {
			return nil, fmt.Errorf("sandbox: resolve %s: %w", target, err)
		}
		out = append(out, real)
	}
	for _, a := range argv[1:] {
		if !filepath.IsAbs(a) {
			continue
		}
		real, err := filepath.EvalSymlinks(a)
		if err != nil {
			continue // an argument that is not a file (a granted dir not made yet, a URL path)
		}
		if i := strings.Index(real, "/node_modules/"); i >= 0 {
			out = append(out, real[:i+len("/node_modules")])
			continue
		}
		if st, err := os.Stat(real); err == nil && !st.IsDir() {
			out = append(out, filepath.Dir(real))
		}
	}
	return out, nil
}

// systemPaths are granted read-only to every sandbox: the dynamic
// loader, libraries and the few /etc files a program reads to start.
// Not /etc as a whole, and not /home, /root or /var.
var systemPaths = []string{
	"/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/localtime",
	"/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/hosts",
	"/usr/share/zoneinfo", "/usr/share/ca-certificates",
	"/proc", "/sys/devices/system/cpu",
}

var deviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

func existing(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// marshalPlan puts the plan on the launcher's command line.
func marshalPlan(p Plan) (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

// targetPath makes cmd.Path absolute against cmd.Dir: the launcher
// execs it after its own setup, without a PATH search of its own.
func targetPath(cmd *exec.Cmd) (string, error) {
	if cmd.Err != nil {
		return "", cmd.Err
	}
	p := cmd.Path
	if !filepath.IsAbs(p) {
		base := cmd.Dir
		if base == "" {
			wd, err := os.Getwd()
			if err != nil {
				return "", err
			}
			base = wd
		}
		p = filepath.Join(base, p)
	}
	return p, nil
}
