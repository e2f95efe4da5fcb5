package core

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// Call is a bridged request (StartBridged) running on a goroutine the core
// owns, and the stream of what its upstream sends meanwhile (progress, log
// messages, server→client requests, input requests). Its transport drives
// it with Next. (A call that cannot outlive its request runs on its
// caller's goroutine instead: Serve.)
type Call struct {
	cs     *CallStream           // &stream
	stream CallStream            // in the same allocation
	done   chan *jsonrpc.Message // buffered 1: the answer
	park   *parkedCall           // a bridged call (StartBridged) only
}

// newCall is a call of sess running in ctx, its stream ready.
func newCall(ctx context.Context, sess *Session) *Call {
	call := &Call{done: make(chan *jsonrpc.Message, 1)}
	call.stream.init(ctx, sess)
	call.cs = &call.stream
	return call
}

// Outcome is what Next stopped at.
type Outcome struct {
	// Resp is the call's answer; every event before it was emitted.
	Resp *jsonrpc.Message
	// InputRequired (bridged calls) is the input_required result to give
	// the client: the call is parked until it retries with the inputs.
	InputRequired json.RawMessage
	// Err (bridged calls) ends the call for its client: a capability it
	// lacks, or too many calls parked.
	Err *jsonrpc.Error
	// Refusal, with Err, is the bound that refused to park the call: before
	// any stream it is answered with its own HTTP status (503 or 429) and
	// Retry-After.
	Refusal *limits.Refusal
	// Woke: wake fired. Stopped: stop fired, and the call was cancelled.
	Woke, Stopped bool
}

// run answers call with f on an owned goroutine, then calls end; once
// Close has begun, it answers at once that the gateway is shutting down.
func (c *Core) run(call *Call, id jsonrpc.ID, f func() *jsonrpc.Message, end func()) {
	if !c.Go(func() {
		defer end()
		call.done <- f()
	}) {
		end()
		call.done <- shuttingDown(id)
	}
}

// shuttingDown is the answer to request id once Close has begun.
func shuttingDown(id jsonrpc.ID) *jsonrpc.Message {
	return jsonrpc.NewError(id, &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: "mcpgw is shutting down; retry against another replica"})
}

// Next is the one event pump: it hands each message the upstream sends
// during the call to emit, in the order they came, and returns at the
// call's answer, when a bridged call needs its client's input or ends for
// it, or when wake or stop fires (stop cancels the call; a nil channel
// never fires).
func (call *Call) Next(stop, wake <-chan struct{}, emit func([]byte)) Outcome {
	p := call.park
	var needs chan *inputNeed
	var failed chan *jsonrpc.Error
	if p != nil {
		if p.takeAgain() {
			return Outcome{InputRequired: p.inputRequired()}
		}
		needs, failed = p.needs, p.failed
	}
	stopped := func() Outcome {
		if p != nil {
			// A closed stream cancels the request (2026-07-28 transport).
			p.cancel()
			p.bridge.forget(p)
		}
		return Outcome{Stopped: true}
	}
	for {
		// A stop that has fired wins over whatever else is ready: select
		// picks at random, and a caller gone must not be handed input to
		// gather for it.
		select {
		case <-stop:
			return stopped()
		default:
		}
		select {
		case b := <-call.cs.events:
			emit(b)
		case <-wake:
			return Outcome{Woke: true}
		case <-stop:
			return stopped()
		case err := <-failed:
			p.bridge.m.BridgeRound(metrics.BridgeMissingCapability)
			p.cancel()
			p.bridge.forget(p)
			return Outcome{Err: err}
		case resp := <-call.done:
			if p != nil {
				p.bridge.forget(p)
				select {
				case err := <-p.failed: // the upstream's answer to a refused request may come first
					return Outcome{Err: err}
				default:
				}
			}
			for len(call.cs.events) > 0 {
				emit(<-call.cs.events)
			}
			return Outcome{Resp: resp}
		case need := <-needs:
			return p.gather(need)
		}
	}
}
