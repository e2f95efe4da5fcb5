package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// A request's own SSE answer stream. Its caller reads it up to the answer:
// the answer then reaches the caller without a hand-off between
// goroutines (a wakeup per call that was on every call's critical path).
// What follows the answer — normally only the stream's end, read so that
// its connection is reused — is read by the caller too when it came with
// the answer, and on a goroutine of the transport's otherwise.
//
// Until the answer the stream is tied to the caller's context, so that a
// caller that gives up (a timeout, a cancellation) is not held by a read:
// the stream is closed, and the client then tells a session-revision
// upstream with notifications/cancelled, as it always has. From the answer
// on, the caller's end is no cancellation and the stream is detached: on
// 2026-07-28 it is read for at most drainAfterAnswer more, on a session
// revision for as long as the upstream keeps it (resumable; ended by the
// request's cancellation or the transport's Close).
type answerStream struct {
	s        *Streamable
	ctx      context.Context // the request's: cancelled by cancel, by the transport's Close, and by the caller's end until detached
	cancel   context.CancelFunc
	detach   func() bool // unties ctx from the caller's context
	resp     *http.Response
	rd       *sse.Reader
	request  jsonrpc.ID
	answered bool
	once     bool          // a 2026-07-28 upstream's stream: not resumable, read briefly after the answer
	drain    *time.Timer   // 2026-07-28: bounds the read after the answer
	retry    time.Duration // the reconnection time the upstream last asked for
}

// readAnswer reads the answer stream of request on the caller's goroutine
// until its answer is delivered, then hands the rest to a goroutine. It
// always returns nil: what the stream ends with (the answer, an error for
// a stream lost before it) is delivered.
func (s *Streamable) readAnswer(ctx context.Context, cancel context.CancelFunc, detach func() bool, resp *http.Response, request jsonrpc.ID) error {
	a := &answerStream{s: s, ctx: ctx, cancel: cancel, detach: detach, resp: resp, request: request,
		rd: sse.NewReaderChunks(resp.Body, s.cfg.MaxMessageBytes, &s.chunks), once: s.stateless()}
	if !a.once {
		s.trackStream(request, cancel) // notifications/cancelled ends it (endStream)
	}
	for !a.answered {
		if !a.next() {
			return nil
		}
	}
	if a.rd.Ended() {
		// The stream's end came with its answer (the upstream wrote both
		// before this read them): read it here, and its connection is
		// back in the pool before the caller has its answer. Else its end
		// is waited for on a goroutine (a wakeup per call).
		a.next()
		return nil
	}
	if !s.goTracked(a.rest) {
		a.resp.Body.Close()
		a.close()
	}
	return nil
}

// rest reads what follows the answer, to the stream's end.
func (a *answerStream) rest() {
	for a.next() {
	}
}

// next reads and delivers one event; at the stream's end it finishes the
// stream and reports false.
func (a *answerStream) next() bool {
	ev, err := a.rd.Next()
	if err != nil {
		a.end(err)
		return false
	}
	if data, ok := message(ev, &a.retry, a.s.log); ok {
		a.track(data)
	}
	return true
}

// track delivers one message of the stream, noting the answer.
func (a *answerStream) track(b []byte) {
	if a.answered {
		a.s.deliver(b, a.request)
		return
	}
	// The delivery's own parse says whether it was the answer, sparing a
	// scan of a large one. The caller, on this goroutine, cannot have
	// taken it yet, so the stream is detached before the caller's end
	// could close it under the read of its end (a new TCP connection per
	// call at high concurrency).
	if a.answered = a.s.deliver(b, a.request); a.answered && a.detach() && a.once {
		a.drain = time.AfterFunc(drainAfterAnswer, a.cancel)
	}
}

// end finishes the stream after err (io.EOF: it ended): a session
// revision's stream lost before its answer is resumed (Last-Event-ID);
// one that cannot be gets the answer that it was lost, now rather than at
// the call's timeout (a response goes only on its request's stream).
func (a *answerStream) end(err error) {
	s := a.s
	if a.drain != nil {
		a.drain.Stop()
	}
	a.resp.Body.Close()
	if !errors.Is(err, io.EOF) && a.ctx.Err() == nil {
		s.log.Warn("upstream response stream broke", zap.Error(err))
	}
	if lastID := a.rd.LastEventID(); !a.answered && lastID != "" && !a.once {
		s.resume(a.ctx, lastID, a.retry, a.track, &a.answered)
	}
	if !a.answered && a.ctx.Err() == nil {
		s.deliver(streamLost(a.request), a.request)
	}
	a.close()
	a.rd.Release() // its buffer, for the next stream of this upstream
}

func (a *answerStream) close() {
	if !a.once {
		a.s.untrackStream(a.request)
	}
	a.cancel()
}
