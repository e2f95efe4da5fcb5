package http1

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peeker looks at a kept connection without reading from it: one
// non-blocking MSG_PEEK, so a connection its server closed while it sat
// idle is dropped before a request is written on it (net/http learns the
// same from each connection's reader goroutine, which this transport does
// not have).
type peeker struct {
	raw  syscall.RawConn
	look func(fd uintptr) bool // p.peek, made once: a closure per call would be an allocation
	open bool
	buf  [1]byte
}

func newPeeker(nc net.Conn) *peeker {
	p := &peeker{}
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			p.raw = raw
		}
	}
	p.look = p.peek
	return p
}

// idle reports whether the connection is open with nothing to read.
func (p *peeker) idle() bool {
	if p.raw == nil {
		return true // not a socket (tests' pipes): nothing to look at
	}
	p.open = false
	return p.raw.Read(p.look) == nil && p.open
}

func (p *peeker) peek(fd uintptr) bool {
	_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.buf[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	// EAGAIN: open and quiet. No error: either the server's FIN (0
	// bytes) or bytes nobody asked for, which would be read as the next
	// answer; either way the connection cannot be used. Any other error:
	// it is gone.
	p.open = errno == unix.EAGAIN
	return true // never wait for readability: this is a look, not a read
}
