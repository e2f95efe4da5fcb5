package streamable_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// TestStatefulStdioUpstream: with stateful: true each downstream session
// gets its own child process, so a server request during one session's call
// is relayed to that session even while another session's call is in
// flight, and a session's child is stopped when the session ends. B
// declares no sampling: a sampler's calls take turns on its session's
// child (host/interactive.go), and B's release is a second call of B's
// session made while its first is held.
func TestStatefulStdioUpstream(t *testing.T) {
	t.Parallel()
	up := gatewaytest.FidStdioUpstream(t, "pipe", "stateful: true")
	gw, base := gatewaytest.FidGatewayGW(t, "", up)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	inA := &gatewaytest.FidInbox{}
	a := gatewaytest.FidConnect(t, base+"/mcp", gatewaytest.FidSampler("A", inA))
	b := gatewaytest.FidConnect(t, base+"/mcp", nil)

	held := make(chan struct{})
	go func() {
		defer close(held)
		gatewaytest.FidExpect(ctx, t, "B", b, "pipe__block", map[string]any{"tag": "hold", "hold": true}, "done hold")
	}()
	if !gatewaytest.FidWaitEvent(up, "start hold", testwait.Long) {
		t.Fatal("B's call never reached its upstream")
	}
	gatewaytest.FidExpect(ctx, t, "A", a, "pipe__sample", map[string]any{"tag": "A"}, "tag=A answer=answer-from-A")
	// B's call holds in B's own child: the release goes through B's session.
	gatewaytest.FidExpect(ctx, t, "release", b, "pipe__release", map[string]any{"tag": "hold"}, "released hold")
	testwait.Recv(t, held, "B's held call to finish")
	if got := inA.Get(); len(got) != 1 {
		t.Errorf("A's sampling handler saw %q, want its one question", got)
	}

	u := gw.Host().Upstream("pipe")
	if n := u.SessionConnections(); n != 2 {
		t.Errorf("per-session connections = %d, want 2 (one child per session)", n)
	}
	_ = b.Close()
	testwait.Until(t, "B's child to stop after B ended (per-session connections 1)", func() bool { return u.SessionConnections() == 1 })
}
