package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// How the proxy reaches inside. The child's network namespace has no
// device but loopback, and the gateway cannot enter it (setns needs
// privileges over the child's user namespace a non-root gateway lacks).
// So the launcher, root in that namespace, brings loopback up, listens on
// 127.0.0.1 there and sends the listening socket over a socketpair to the
// gateway, which accepts on it directly: a socket stays in the namespace
// it was made in, whoever holds it. No helper process runs inside, the
// child never holds the socket, and each connection the child opens is a
// connection the gateway's proxy reads itself.

// egressSetup makes the socketpair and the proxy for one start.
func (r *Run) egressSetup(cmd *exec.Cmd, plan *Plan, opt Options) error {
	if len(r.spec.Egress) == 0 {
		return fmt.Errorf("sandbox: upstream %q: network egress with no hosts listed; list them in egress, or use network none", r.spec.Upstream)
	}
	p, err := newEgressProxy(r.spec.Upstream, r.spec.Egress, r.spec.EgressMaxTunnels, opt.Egress)
	if err != nil {
		return err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: upstream %q: egress socketpair: %w", r.spec.Upstream, err)
	}
	r.egress = p
	r.egressParent = os.NewFile(uintptr(fds[0]), "egress-gateway")
	r.egressChild = os.NewFile(uintptr(fds[1]), "egress-child")
	cmd.ExtraFiles = append(cmd.ExtraFiles, r.egressChild)
	plan.EgressFD = 2 + len(cmd.ExtraFiles) // ExtraFiles[i] is fd 3+i
	return nil
}

// Started is called once the child has started: the gateway drops its
// copy of the child's end and serves the proxy socket when it arrives.
func (r *Run) Started() {
	if r == nil || r.egress == nil || r.egressDone != nil {
		return
	}
	r.egressChild.Close()
	r.egressChild = nil
	conn, err := net.FileConn(r.egressParent)
	r.egressParent.Close()
	r.egressParent = nil
	done := make(chan struct{})
	r.egressDone = done
	if err != nil {
		close(done)
		return
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		conn.Close()
		close(done)
		return
	}
	// Closed by egressStop, which ends a wait for a child that never
	// sends (it died first).
	if !r.egress.track(uc) {
		uc.Close()
		close(done)
		return
	}
	go func() {
		defer close(done)
		defer r.egress.untrack(uc)
		ln, err := receiveListener(uc)
		if err != nil {
			return
		}
		r.egress.serve(ln)
	}()
}

// receiveListener takes the launcher's listening socket off uc.
func receiveListener(uc *net.UnixConn) (net.Listener, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("egress: no socket from the launcher")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, errors.New("egress: no socket from the launcher")
	}
	f := os.NewFile(uintptr(fds[0]), "egress-listener")
	defer f.Close()
	return net.FileListener(f)
}

// egressStop ends the proxy and every tunnel of this start.
func (r *Run) egressStop() {
	if r.egress == nil {
		return
	}
	for _, f := range []*os.File{r.egressChild, r.egressParent} {
		if f != nil {
			f.Close()
		}
	}
	r.egressChild, r.egressParent = nil, nil
	r.egress.close()
	if r.egressDone != nil {
		<-r.egressDone
	}
	r.egress = nil
}

// Launcher side.

// egressListen brings up the namespace's loopback, listens on 127.0.0.1
// and sends the socket to the gateway on fd; it returns the port.
func egressListen(fd int) (int, error) {
	defer unix.Close(fd)
	if err := loopbackUp(); err != nil {
		return 0, fmt.Errorf("egress: bring up loopback: %w", err)
	}
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("egress: socket: %w", err)
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return 0, fmt.Errorf("egress: bind: %w", err)
	}
	if err := unix.Listen(lfd, 128); err != nil {
		return 0, fmt.Errorf("egress: listen: %w", err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		return 0, fmt.Errorf("egress: getsockname: %w", err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return 0, errors.New("egress: listener is not IPv4")
	}
	if err := unix.Sendmsg(fd, []byte{'L'}, unix.UnixRights(lfd), nil, 0); err != nil {
		return 0, fmt.Errorf("egress: hand the socket to the gateway: %w", err)
	}
	return in4.Port, nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// proxyEnv points the usual proxy variables at the proxy: the only way
// out, so they replace whatever the config set. Node (22.21+, 24.5+)
// honours them in fetch and http when NODE_USE_ENV_PROXY is 1.
func proxyEnv(env []string, port int) []string {
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	set := map[string]string{
		"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
		"ALL_PROXY": url, "all_proxy": url, "NO_PROXY": "", "no_proxy": "",
	}
	out := make([]string, 0, len(env)+len(set)+1)
	nodeProxy := false
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok {
			continue
		}
		if k == "NODE_USE_ENV_PROXY" {
			nodeProxy = true
		}
		out = append(out, kv)
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"} {
		out = append(out, k+"="+set[k])
	}
	if !nodeProxy {
		out = append(out, "NODE_USE_ENV_PROXY=1")
	}
	return out
}
