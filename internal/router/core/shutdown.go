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

// cutter is the context Cut cancels; its zero value is ready.
type cutter struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
}

func (k *cutter) context() context.Context {
	k.once.Do(func() { k.ctx, k.cancel = context.WithCancel(context.Background()) })
	return k.ctx
}

// Cut cancels every request Handle is running; each is answered with an
// error naming the shutdown. For the end of a graceful stop, after Drain.
func (c *Core) Cut() {
	c.cut.context()
	c.cut.cancel()
}

// cuttable derives a context from ctx that Cut cancels (cause errCut);
// stop releases it.
func (c *Core) cuttable(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(c.cut.context(), func() { cancel(errCut) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
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
