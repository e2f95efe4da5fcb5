package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LauncherMain runs the launcher mode when os.Args asks for it (argv[1]
// is Marker) and never returns then; otherwise it returns at once. The
// gateway's main and the TestMain of packages that start sandboxed
// children call it first.
func LauncherMain() {
	if len(os.Args) < 3 || os.Args[1] != Marker {
		return
	}
	// launch returns only when it could not exec the server.
	fmt.Fprintf(os.Stderr, "mcpgw sandbox: %v\n", launch(os.Args[2]))
	os.Exit(126)
}

// launch applies the plan and execs the server; it returns why not.
func launch(arg string) error {
	var p Plan
	if err := json.Unmarshal([]byte(arg), &p); err != nil {
		return fmt.Errorf("bad plan: %w", err)
	}
	// Landlock, no_new_privs and the capability bounding set are per
	// thread: set them on the thread that execs.
	runtime.LockOSThread()
	for _, procs := range p.CgroupProcs {
		if err := os.WriteFile(procs, []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", procs, err)
		}
	}
	// Mounts stay in this namespace: nothing propagates back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	tmpOpts := ""
	if p.TmpBytes > 0 {
		tmpOpts = "size=" + strconv.FormatInt(p.TmpBytes, 10)
	}
	// Granted paths under /tmp (a project checked out there, its
	// node_modules) are held open before the private /tmp covers them,
	// and bound back at their place in it.
	under, err := openUnderTmp(append(append([]string{p.Target}, p.ReadOnly...), p.ReadWrite...))
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpOpts); err != nil {
		return fmt.Errorf("private /tmp: %w", err)
	}
	if err := bindUnderTmp(under); err != nil {
		return err
	}
	// /dev/shm likewise, where it exists: a shared one is a channel out.
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		_ = unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, tmpOpts)
	}
	if err := setRlimit(unix.RLIMIT_DATA, p.RlimitData); err != nil {
		return fmt.Errorf("RLIMIT_DATA: %w", err)
	}
	if err := setRlimit(unix.RLIMIT_NPROC, int64(p.RlimitNproc)); err != nil {
		return fmt.Errorf("RLIMIT_NPROC: %w", err)
	}
	if err := setRlimit(unix.RLIMIT_NOFILE, int64(p.RlimitNofile)); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	env := os.Environ()
	proxyPort := 0
	if p.EgressFD > 0 {
		port, err := egressListen(p.EgressFD)
		if err != nil {
			return err
		}
		env, proxyPort = proxyEnv(env, port), port
	}
	rw := append([]string{"/tmp", "/dev/shm"}, p.ReadWrite...)
	if err := restrict(p.ReadOnly, rw, p.Files, p.NoNetwork || proxyPort > 0, proxyPort); err != nil {
		return err
	}
	if err := dropCaps(); err != nil {
		return err
	}
	return fmt.Errorf("exec %s: %w", p.Target, syscall.Exec(p.Target, p.Argv, env))
}

func setRlimit(res int, v int64) error {
	if v <= 0 {
		return nil
	}
	lim := unix.Rlimit{Cur: uint64(v), Max: uint64(v)}
	return unix.Setrlimit(res, &lim)
}

// dropCaps empties the bounding set and every capability set: root in
// the user namespace was needed for the mounts; the server gets none.
func dropCaps() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	return nil
}

// Landlock access rights by ABI.
const (
	fsRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsV1   = fsRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// landlockNetPortAttr is the kernel's struct landlock_net_port_attr
// (ABI 4), which x/sys does not define.
type landlockNetPortAttr struct {
	allowedAccess uint64
	port          uint64
}

const landlockRuleNetPort = 2 // LANDLOCK_RULE_NET_PORT

func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// handledFS is every filesystem right the kernel's Landlock knows: a
// right not handled would be allowed everywhere.
func handledFS(abi int) uint64 {
	h := uint64(fsV1)
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

// restrict confines this thread (and what it execs) to the grants; with
// limitNet, TCP too (ABI 4+): no bind, and connect only to proxyPort
// (0: none), the egress proxy on the namespace's loopback.
func restrict(ro, rw, files []string, limitNet bool, proxyPort int) error {
	abi, err := landlockABI()
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	handled := handledFS(abi)
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	size := unsafe.Sizeof(uint64(0)) // Access_fs only before ABI 4
	if abi >= 4 && limitNet {
		// No TCP bind or connect even if a network appeared.
		attr.Access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		size = 2 * unsafe.Sizeof(uint64(0))
	}
	if abi >= 6 {
		// No signals to, or abstract sockets of, processes outside.
		attr.Scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock ruleset: %w", errno)
	}
	rfd := int(fd)
	defer unix.Close(rfd)
	add := func(path string, access uint64) error {
		pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("grant %s: %w", path, err)
		}
		defer unix.Close(pfd)
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return fmt.Errorf("grant %s: %w", path, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			access &= fileRights
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: access & handled, Parent_fd: int32(pfd)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rfd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("grant %s: %w", path, errno)
		}
		return nil
	}
	for _, p := range ro {
		if err := add(p, fsRead); err != nil {
			return err
		}
	}
	for _, p := range rw {
		if _, err := os.Stat(p); err != nil {
			continue // /dev/shm where there is none
		}
		if err := add(p, handled); err != nil {
			return err
		}
	}
	for _, p := range files {
		if err := add(p, unix.LANDLOCK_ACCESS_FS_READ_FILE|unix.LANDLOCK_ACCESS_FS_WRITE_FILE); err != nil {
			return err
		}
	}
	if attr.Access_net != 0 && proxyPort > 0 {
		rule := landlockNetPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(proxyPort)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rfd), landlockRuleNetPort, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("landlock: allow the egress proxy's port: %w", errno)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rfd), 0, 0); errno != 0 {
		return fmt.Errorf("landlock restrict: %w", errno)
	}
	return nil
}

// heldPath is a path under /tmp held open (O_PATH) across the mount of
// the private /tmp.
type heldPath struct {
	path string
	fd   int
	dir  bool
}

// openUnderTmp opens the paths under /tmp among paths, shortest first (a
// parent is bound before what is inside it).
func openUnderTmp(paths []string) ([]heldPath, error) {
	var out []heldPath
	seen := map[string]bool{}
	for _, p := range paths {
		c := filepath.Clean(p)
		if !strings.HasPrefix(c, "/tmp/") || seen[c] {
			continue
		}
		seen[c] = true
		fd, err := unix.Open(c, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("grant %s: %w", c, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("grant %s: %w", c, err)
		}
		out = append(out, heldPath{path: c, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].path) < len(out[j].path) })
	return out, nil
}

// bindUnderTmp binds each held path at its own place in the private /tmp
// and closes it.
func bindUnderTmp(held []heldPath) error {
	defer func() {
		for _, h := range held {
			unix.Close(h.fd)
		}
	}()
	for _, h := range held {
		if h.dir {
			if err := os.MkdirAll(h.path, 0o755); err != nil {
				return fmt.Errorf("grant %s in the private /tmp: %w", h.path, err)
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err != nil {
				return fmt.Errorf("grant %s in the private /tmp: %w", h.path, err)
			}
			if f, err := os.OpenFile(h.path, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		src := "/proc/self/fd/" + strconv.Itoa(h.fd)
		if err := unix.Mount(src, h.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("grant %s in the private /tmp: %w", h.path, err)
		}
	}
	return nil
}
