package client

import (
	"context"
	"encoding/json"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Sent is what the client knows of a message it hands a transport: a
// transport told it (sendKnown) does not read the bytes it was just
// handed again (issue 28: read once, hand down).
type Sent struct {
	// Method is a request's or notification's method ("" for a response).
	Method string
	// ID is a request's id (nil for anything else): what the upstream
	// sends on the request's own stream belongs to it.
	ID jsonrpc.ID
	// Cancels is, for notifications/cancelled, the requestId it cancels
	// as JSON text ("" otherwise).
	Cancels string
	// Name and HasName say what Mcp-Name mirrors (a 2026-07-28
	// upstream's request header): the field mcp.NameHeaderField names,
	// as the params sent carry it.
	Name    string
	HasName bool
	// Params are the message's params (readSent's, for Send).
	Params json.RawMessage
}

// knownSender is a transport that takes what the client knows of a
// message with it (Streamable).
type knownSender interface {
	sendKnown(ctx context.Context, msg []byte, sent Sent) error
}

// transmit hands msg to the transport, with what the client knows of it
// when the transport takes that.
func (c *Client) transmit(ctx context.Context, msg []byte, sent Sent) error {
	if ks, ok := c.t.(knownSender); ok {
		return ks.sendKnown(ctx, msg, sent)
	}
	return c.t.Send(ctx, msg)
}

// requestSent is what a request carries for its transport: its id, and
// the name Mcp-Name mirrors (target: what the caller forwarded the params
// naming, "" when it did not say, and then they are read for it).
func requestSent(method string, id jsonrpc.ID, params json.RawMessage, target string) Sent {
	sent := Sent{Method: method, ID: id, Params: params}
	field := mcp.NameHeaderField(method)
	switch {
	case field == "":
	case target != "":
		sent.Name, sent.HasName = target, true
	default:
		sent.Name, sent.HasName = rawjson.GetString(params, field)
	}
	return sent
}
