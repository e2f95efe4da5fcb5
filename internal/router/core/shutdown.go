package core

import (
	"context"
	"errors"
	"sync"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Cutting what the drain left. A graceful stop lets calls in flight finish
// for --drain-timeout; what still runs then is cut. Closing the
// connections would leave those callers without an answer, so Cut first
// cancels every call Handle is running with errCut, and each is answered —
// on its own JSON response, SSE stream or legacy session — with an error
// that names the shutdown; only then are the connections closed.

// errCut is the cause of a call's cancellation by Cut.
var errCut = errors.New("mcpgw: cut at shutdown")

// cutter holds the cancel functions of the calls Handle is running, for
// Cut; its zero value is ready. A registry rather than a context every call
// hangs an AfterFunc on: that cost ~4 allocations per call.
type cutter struct {
	mu    sync.Mutex
	done  bool // Cut ran: every later call is cut at once
	next  uint64
	calls map[uint64]context.CancelCauseFunc
}

// Cut cancels every request Handle is running; each is answered with an
// error naming the shutdown. For the end of a graceful stop, after Drain.
func (c *Core) Cut() {
	k := &c.cut
	k.mu.Lock()
	calls := k.calls
	k.done, k.calls = true, nil
	k.mu.Unlock()
	for _, cancel := range calls {
		cancel(errCut)
	}
	c.cancel(errCut) // bridged calls, which derive from c.ctx (Handle registers none of them)
}

// cuttable derives a context from ctx that Cut cancels (cause errCut);
// uncut(id, cancel) releases it. (Two results rather than a closure: one
// allocation less per call.)
func (c *Core) cuttable(ctx context.Context) (context.Context, context.CancelCauseFunc, uint64) {
	ctx, cancel := context.WithCancelCause(ctx)
	k := &c.cut
	k.mu.Lock()
	if k.done {
		k.mu.Unlock()
		cancel(errCut)
		return ctx, cancel, 0
	}
	if k.calls == nil {
		k.calls = map[uint64]context.CancelCauseFunc{}
	}
	k.next++
	id := k.next
	k.calls[id] = cancel
	k.mu.Unlock()
	return ctx, cancel, id
}

// uncut releases what cuttable made for call id (0: one made after Cut,
// never registered).
func (c *Core) uncut(id uint64, cancel context.CancelCauseFunc) {
	if id != 0 {
		k := &c.cut
		k.mu.Lock()
		delete(k.calls, id)
		k.mu.Unlock()
	}
	cancel(nil)
}

// cutAnswer is the answer to request id when Cut ended it (ctx is the one
// cuttable made), or nil.
func cutAnswer(ctx context.Context, id jsonrpc.ID) *jsonrpc.Message {
	if !errors.Is(context.Cause(ctx), errCut) {
		return nil
	}
	return jsonrpc.NewError(id, jsonrpc.Errorf(jsonrpc.CodeInternalError,
		"mcpgw is shutting down: this call was still running when the drain timeout (mcpgw run --drain-timeout) ran out, so it was cancelled; it may have taken effect upstream, so check before retrying it against another replica"))
}
