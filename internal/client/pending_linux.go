package client

import "golang.org/x/sys/unix"

// pipePending is how many bytes wait unread in the pipe fd (FIONREAD).
func pipePending(fd uintptr) int {
	n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	if err != nil {
		return 0
	}
	return n
}
