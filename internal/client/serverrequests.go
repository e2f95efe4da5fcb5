package client

import (
	"context"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// Requests the upstream sends (sampling, elicitation, roots, ping) are
// answered beside the reader, each on a goroutine, because relaying one
// can wait on a person. An upstream can send them faster than they are
// answered, or never read the answers, so they are bounded (DESIGN.md
// invariant 7): at most MaxServerRequests being answered on the
// connection and MaxServerRequestsPerCall for one call. The overflow is
// answered at once with a -32004 error naming the bound, and ping, which
// needs nobody, is answered by the reader itself: an upstream that floods
// either and never reads holds the reader in its write, not a goroutine
// per request.

// answerTimeout bounds the write of one answer to the upstream.
const answerTimeout = 10 * time.Second

// serverRequest takes one request the upstream sent; related names the
// call whose stream carried it, if the transport knows.
func (c *Client) serverRequest(m *jsonrpc.Message, related jsonrpc.ID) {
	if m.Method == mcp.MethodPing {
		c.send(m.Method, jsonrpc.NewResult(m.ID, json.RawMessage(`{}`)))
		return
	}
	cl := c.owner(related)
	if r := c.admitServerRequest(cl); r != nil {
		if c.opts.OnRefused != nil {
			c.opts.OnRefused(r.Bound)
		}
		c.log.Debug("refusing a request from the upstream: too many being answered", zap.String("method", m.Method), zap.String("bound", r.Bound))
		c.send(m.Method, jsonrpc.NewError(m.ID, r.JSONRPC()))
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.serverRequestDone(cl)
		c.answer(m, cl)
	}()
}

// admitServerRequest counts one more request being answered for the
// connection and cl (nil: no call), or returns the bound that is full.
func (c *Client) admitServerRequest(cl *call) *limits.Refusal {
	maxConn := c.opts.MaxServerRequests
	if maxConn <= 0 {
		maxConn = config.DefaultMaxServerRequests
	}
	maxCall := c.opts.MaxServerRequestsPerCall
	if maxCall <= 0 {
		maxCall = config.DefaultMaxServerRequestsPerCall
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.serverReqs >= maxConn {
		return &limits.Refusal{Bound: orSetting(c.opts.ServerRequestsSetting, "max_server_requests"), Max: maxConn, What: "requests from this upstream being answered at once", RetryAfter: 1}
	}
	if cl != nil && cl.serverReqs >= maxCall {
		return &limits.Refusal{Bound: orSetting(c.opts.ServerRequestsPerCallSetting, "max_server_requests_per_call"), Max: maxCall, What: "requests from this upstream for one call being answered at once", RetryAfter: 1}
	}
	c.serverReqs++
	if cl != nil {
		cl.serverReqs++
	}
	return nil
}

func (c *Client) serverRequestDone(cl *call) {
	c.mu.Lock()
	c.serverReqs--
	if cl != nil {
		cl.serverReqs--
	}
	c.mu.Unlock()
}

func orSetting(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// send writes one answer to an upstream request.
func (c *Client) send(method string, resp *jsonrpc.Message) {
	b, err := jsonrpc.Encode(resp)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, answerTimeout)
	defer cancel()
	if err := c.transmit(ctx, b, Sent{}); err != nil { // a response: no method, no id of its own
		c.log.Debug("could not answer upstream request", zap.String("method", method), zap.Error(err))
	}
}
