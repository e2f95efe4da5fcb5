package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nobody is the id a root gateway's children run as, outside their
// user namespace: owning nothing, it can read only what is world-readable.
const nobody = 65534

// Run is one sandboxed start of a child: its cgroups, removed by Exited.
type Run struct {
	spec    Spec
	desc    string
	cgroups []string // cgroup directories made for this start
	memCg   string
	pidsCg  string
	memMode string
	killed  string // the limit that stopped the child (Exited)

	// The egress proxy (Network "egress"): the child's end of the
	// socketpair the launcher sends its proxy socket on, the gateway's
	// end, and the goroutine serving it (Started).
	egress       *egressProxy
	egressChild  *os.File
	egressParent *os.File
	egressDone   chan struct{}
}

// Wrap rewrites cmd (built by exec.Command, not started) to start the
// launcher, which applies spec and then execs cmd's program. It refuses,
// naming the missing feature, when the kernel cannot apply spec.
func Wrap(cmd *exec.Cmd, spec Spec, opt Options) (*Run, error) {
	abi, err := landlockABI()
	if err != nil || abi < 1 {
		return nil, fmt.Errorf("%w: upstream %q: Landlock is not available (kernel 5.13+ with lsm=landlock); remove sandbox or run on such a kernel", ErrUnsupported, spec.Upstream)
	}
	if reason := userNamespaces(); reason != "" {
		return nil, fmt.Errorf("%w: upstream %q: user namespaces are not available (%s); remove sandbox or enable them", ErrUnsupported, spec.Upstream, reason)
	}
	target, err := targetPath(cmd)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	launcher := opt.Launcher
	if launcher == "" {
		if launcher, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("sandbox: find the gateway's binary for the launcher: %w", err)
		}
	}
	rt, err := runtimePaths(spec, target, cmd.Args)
	if err != nil {
		return nil, err
	}
	if cmd.Dir != "" {
		// The working directory the child was given is one it may read.
		rt = append(rt, cmd.Dir)
	}
	plan := Plan{
		Target:       target,
		Argv:         cmd.Args,
		ReadOnly:     existing(append(append(rt, systemPaths...), spec.ReadOnly...)),
		ReadWrite:    spec.ReadWrite,
		Files:        existing(deviceFiles),
		NoNetwork:    spec.Network == "none" || spec.Network == "",
		RlimitNofile: spec.MaxOpenFiles,
		TmpBytes:     spec.TmpBytes,
	}
	for _, p := range append(append([]string{target}, spec.ReadOnly...), spec.ReadWrite...) {
		// A path under /tmp is bound into the private /tmp (launch); /tmp
		// itself would be the host's whole /tmp.
		if filepath.Clean(p) == "/tmp" {
			return nil, fmt.Errorf("sandbox: upstream %q: %s is the whole /tmp, which the sandbox replaces with a private one; grant a directory inside it, or move it elsewhere", spec.Upstream, p)
		}
	}
	for _, p := range spec.ReadWrite {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("sandbox: upstream %q: read_write path %s: %w", spec.Upstream, p, err)
		}
	}
	for _, p := range spec.ReadOnly {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("sandbox: upstream %q: read_only path %s: %w", spec.Upstream, p, err)
		}
	}
	run := &Run{spec: spec}
	switch spec.Network {
	case "", "none":
	case "egress":
		if err := run.egressSetup(cmd, &plan, opt); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("sandbox: upstream %q: network %q is not one of %s", spec.Upstream, spec.Network, strings.Join(NetworkModes, ", "))
	}
	root := opt.CgroupRoot
	if root == "" {
		root = "/sys/fs/cgroup"
	}
	outUID, outGID := os.Geteuid(), os.Getegid()
	if outUID == 0 {
		outUID, outGID = nobody, nobody
	}
	memMode, cpuMode, procMode := "", "", ""
	fail := func(err error) (*Run, error) { run.Exited(); return nil, err }
	if spec.MemoryBytes > 0 {
		dir, err := run.cgroup(root, "memory", outUID, map[string]string{
			"memory.limit_in_bytes": strconv.FormatInt(spec.MemoryBytes, 10),
			// Swap counts too where accounted; absent without swap accounting.
			"memory.memsw.limit_in_bytes?": strconv.FormatInt(spec.MemoryBytes, 10),
		})
		switch {
		case err == nil:
			run.memCg, memMode = dir, "cgroup"
			plan.CgroupProcs = append(plan.CgroupProcs, filepath.Join(dir, "cgroup.procs"))
		default:
			// RLIMIT_DATA, not RLIMIT_AS: it counts writable private
			// memory, not the address space V8 reserves (node does not
			// start under a 512 MiB RLIMIT_AS, and runs under RLIMIT_DATA).
			plan.RlimitData, memMode = spec.MemoryBytes, "rlimit"
		}
	}
	if spec.CPUs > 0 {
		period := 100000
		dir, err := run.cgroup(root, "cpu", outUID, map[string]string{
			"cpu.cfs_period_us": strconv.Itoa(period),
			"cpu.cfs_quota_us":  strconv.Itoa(int(spec.CPUs * float64(period))),
		})
		if err != nil {
			return fail(fmt.Errorf("%w: upstream %q: sandbox.cpus needs a writable cgroup cpu controller (%v); remove cpus or delegate the cgroup", ErrUnsupported, spec.Upstream, err))
		}
		cpuMode = "cgroup"
		plan.CgroupProcs = append(plan.CgroupProcs, filepath.Join(dir, "cgroup.procs"))
	}
	if spec.MaxProcesses > 0 {
		dir, err := run.cgroup(root, "pids", outUID, map[string]string{"pids.max": strconv.Itoa(spec.MaxProcesses)})
		if err == nil {
			run.pidsCg, procMode = dir, "cgroup"
			plan.CgroupProcs = append(plan.CgroupProcs, filepath.Join(dir, "cgroup.procs"))
		} else {
			// Counts every process of the user the child runs as.
			plan.RlimitNproc, procMode = spec.MaxProcesses, "rlimit"
		}
	}
	run.memMode = memMode
	run.desc = describe(spec, memMode, cpuMode, procMode)
	arg, err := marshalPlan(plan)
	if err != nil {
		return fail(err)
	}
	cmd.Path = launcher
	cmd.Args = []string{launcher, Marker, arg}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	sp := cmd.SysProcAttr
	sp.Cloneflags |= unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
	// Both modes start in an empty network namespace: egress adds only
	// the proxy socket on its loopback.
	sp.Cloneflags |= unix.CLONE_NEWNET
	// Root inside (to mount /tmp; every capability is dropped before the
	// server runs), an unprivileged id outside.
	sp.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: outUID, Size: 1}}
	sp.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: outGID, Size: 1}}
	sp.GidMappingsEnableSetgroups = false
	// Become that id: a mapping alone leaves a root gateway's child with
	// its old (unmapped) ids and no capabilities in the namespace.
	sp.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
	return run, nil
}

// userNamespaces says why this process could not make a user namespace
// ("" if it can, as far as the settings tell).
func userNamespaces() string {
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return "kernel without CONFIG_USER_NS"
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return "user.max_user_namespaces is 0"
	}
	if os.Geteuid() != 0 {
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
			return "kernel.unprivileged_userns_clone is 0"
		}
		if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
			return "kernel.apparmor_restrict_unprivileged_userns is 1"
		}
	}
	return ""
}

// cgroup makes a fresh cgroup under root/controller/mcpgw, writes its
// settings (a key ending in "?" may be missing) and hands cgroup.procs to
// the child's outside id, so the launcher can move itself in before
// anything else runs.
func (r *Run) cgroup(root, controller string, uid int, settings map[string]string) (string, error) {
	base := filepath.Join(root, controller)
	if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
		return "", fmt.Errorf("no cgroup v1 %s hierarchy at %s", controller, base)
	}
	parent := filepath.Join(base, "mcpgw")
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	sweep(parent)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Join(parent, fmt.Sprintf("%s-%d-%s", safeName(r.spec.Upstream), os.Getpid(), hex.EncodeToString(rnd[:])))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	r.cgroups = append(r.cgroups, dir)
	for k, v := range settings {
		optional := strings.HasSuffix(k, "?")
		k = strings.TrimSuffix(k, "?")
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0); err != nil && !optional {
			return "", fmt.Errorf("write %s: %w", k, err)
		}
	}
	if err := os.Chown(filepath.Join(dir, "cgroup.procs"), uid, -1); err != nil {
		return "", err
	}
	return dir, nil
}

// sweep removes the cgroups a gateway that died without stopping its
// children (SIGKILL, a crash) left behind: named NAME-PID-RANDOM, where
// PID is no longer running. Only empty groups can be removed, so a group
// still holding a live child stays.
func sweep(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(parts) < 3 {
			continue
		}
		pid, err := strconv.Atoi(parts[len(parts)-2])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			_ = os.Remove(filepath.Join(parent, e.Name()))
		}
	}
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// Exited explains a limit the child was stopped by (" " + reason, or "")
// and removes the start's cgroups. Call it once the child has exited.
func (r *Run) Exited() string {
	if r == nil {
		return ""
	}
	reason := ""
	if r.memCg != "" && counter(filepath.Join(r.memCg, "memory.oom_control"), "oom_kill") > 0 {
		r.killed = "memory"
		reason = fmt.Sprintf(" (killed by its sandbox memory limit, upstreams.%s.sandbox.memory = %dMiB)", r.spec.Upstream, r.spec.MemoryBytes>>20)
	} else if r.pidsCg != "" && counter(filepath.Join(r.pidsCg, "pids.events"), "max") > 0 {
		r.killed = "max_processes"
		reason = fmt.Sprintf(" (refused processes by its sandbox limit, upstreams.%s.sandbox.max_processes = %d)", r.spec.Upstream, r.spec.MaxProcesses)
	} else if r.memMode == "rlimit" {
		reason = fmt.Sprintf(" (ran under a sandbox address-space limit, upstreams.%s.sandbox.memory = %dMiB, as RLIMIT_DATA: an allocation past it fails)", r.spec.Upstream, r.spec.MemoryBytes>>20)
	}
	r.egressStop()
	for i := len(r.cgroups) - 1; i >= 0; i-- {
		// The group is empty once the child and its process group are
		// gone; a straggler still leaving gets a moment.
		deadline := time.Now().Add(time.Second)
		for os.Remove(r.cgroups[i]) != nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	r.cgroups = nil
	return reason
}

// KilledBy names the limit (its config key under sandbox) that stopped
// the child, once Exited has run; "" if none did, as far as the kernel
// tells.
func (r *Run) KilledBy() string {
	if r == nil {
		return ""
	}
	return r.killed
}

// counter reads "key N" from a cgroup v1 flat-keyed file.
func counter(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
