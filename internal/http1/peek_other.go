//go:build !linux

package http1

import "net"

// peeker is a no-op where MSG_PEEK is not used: a kept connection its
// server closed fails its first request (which RoundTrip sends again on
// a new connection only if it may be sent twice: not a POST).
type peeker struct{}

func newPeeker(net.Conn) *peeker { return &peeker{} }

func (*peeker) idle() bool { return true }
