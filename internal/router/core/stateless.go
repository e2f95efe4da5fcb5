package core

import (
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// What every transport that carries 2026-07-28 (stateless) requests needs:
// recognising one, reading its per-request _meta, the methods the revision
// does not have, and opening a subscriptions/listen stream. Streamable HTTP
// (package streamable) adds its headers; stdio (package serial) its lines.

// IsStatelessRequest reports whether msg is a 2026-07-28 request by its
// own content: it is server/discover, or its _meta names a protocol
// version (a transport may know more, such as an HTTP version header).
func IsStatelessRequest(msg *jsonrpc.Message) bool {
	if msg.Method == mcp.MethodServerDiscover {
		return true
	}
	meta, ok := rawjson.Get(msg.Params, "_meta")
	if !ok {
		return false
	}
	_, ok = rawjson.Get(meta, mcp.MetaProtocolVersion)
	return ok
}

// StatelessMeta is what a 2026-07-28 request's _meta says of its caller.
type StatelessMeta struct {
	Version    mcp.Revision
	RawVersion string // as sent, for messages
	Caps, Info json.RawMessage
	Level      string // the log level it asks for ("": none)
}

// ReadStatelessMeta reads and checks a stateless request's _meta: the
// protocol version and client capabilities are required. Whether the
// version is one mcpgw serves statelessly is CheckVersion's to say, so a
// transport can check its own mirrors of it first.
func ReadStatelessMeta(params json.RawMessage) (StatelessMeta, *jsonrpc.Error) {
	return StatelessMetaOf(mcp.ReadParams("", params))
}

// StatelessMetaOf is ReadStatelessMeta of the params as the transport
// already read them.
func StatelessMetaOf(p *mcp.Params) (StatelessMeta, *jsonrpc.Error) {
	if len(p.Meta) == 0 || p.Meta[0] != '{' {
		return StatelessMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta is required in protocol revision %s: it carries %s and %s", mcp.Version20260728, mcp.MetaProtocolVersion, mcp.MetaClientCapabilities)
	}
	if !p.VersionOK {
		return StatelessMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta[%q] is required", mcp.MetaProtocolVersion)
	}
	caps := p.Capabilities
	if len(caps) == 0 || caps[0] != '{' {
		return StatelessMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params._meta[%q] is required (an object, {} when the client offers nothing)", mcp.MetaClientCapabilities)
	}
	return StatelessMeta{Version: mcp.Revision(p.Version), RawVersion: p.Version, Caps: caps, Level: p.LogLevel, Info: p.ClientInfo}, nil
}

// CheckVersion refuses a version mcpgw does not serve statelessly, with
// the versions it supports in data (clients negotiate from them).
func (m StatelessMeta) CheckVersion() *jsonrpc.Error {
	if m.Version.Stateless() {
		return nil
	}
	data, _ := json.Marshal(map[string]any{"supported": mcp.AllVersions, "requested": m.Version})
	return &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version " + m.RawVersion, Data: data}
}

// CheckStatelessMethod refuses what a stateless caller cannot ask: the
// session revisions' own methods, and methods nobody serves. Transports
// answer server/discover and subscriptions/listen before asking.
func CheckStatelessMethod(method string, version mcp.Revision) *jsonrpc.Error {
	if mcp.Method(method).SessionOnly {
		return jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q does not exist in protocol revision %s", method, version)
	}
	if !IsList(method) && !mcp.Routed(method) {
		return jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %q", method)
	}
	return nil
}

// OpenListen makes sess (a stateless request's) the subscriptions/listen
// stream msg asks for: the resource subscriptions it names are made
// through Handle, as resources/subscribe (so the access policy and the
// rate limits apply to what a stream watches), and the stream is
// registered for list changes. ack is the encoded
// notifications/subscriptions/acknowledged to send first (naming what will
// be delivered); the transport then carries sess.Outbox() until the
// stream ends, and calls end.
func (c *Core) OpenListen(ctx context.Context, sess *Session, msg *jsonrpc.Message) (ack []byte, end func(), jerr *jsonrpc.Error) {
	var p struct {
		Notifications *mcp.ListenFilter `json:"notifications"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Notifications == nil {
		return nil, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "subscriptions/listen: params.notifications is required")
	}
	f := p.Notifications
	if jerr := c.tooManyListenURIs(sess, len(f.ResourceSubscriptions)); jerr != nil {
		return nil, nil, jerr
	}
	// Tagged before it is registered: the list-change coalescer reads the
	// tag of every registered stream, at any moment.
	sess.Listen(json.RawMessage(msg.ID))
	// Registered before its subscriptions are made: the stream holds its
	// principal's slot from the start.
	if jerr := c.AddListener(sess, f); jerr != nil {
		return nil, nil, jerr
	}
	var acked []string
	for _, uri := range f.ResourceSubscriptions {
		uriParams, _ := json.Marshal(map[string]string{"uri": uri})
		sub := jsonrpc.NewRequest(msg.ID, mcp.MethodResourcesSubscribe, uriParams)
		if resp := c.Handle(ctx, sess, sub, nil, nil); resp.Error == nil {
			acked = append(acked, uri)
		} else {
			c.log.Debug("listen: resource subscription refused", zap.String("uri", uri), zap.String("error", resp.Error.Message))
		}
	}
	agreed := *f
	agreed.ResourceSubscriptions = acked
	ackParams, _ := json.Marshal(map[string]any{"notifications": agreed, "_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: sess.SubscriptionID()}})
	ack, _ = jsonrpc.Encode(jsonrpc.NewNotification(mcp.NotificationSubscriptionsAcked, ackParams))
	return ack, func() {
		c.RemoveListener(sess)
		c.EndSubscriptions(sess)
	}, nil
}

// ListenResult is the result that ends a listen stream gracefully (the
// gateway draining, or the client's input ending).
func ListenResult(sess *Session, id jsonrpc.ID) *jsonrpc.Message {
	res, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{mcp.MetaSubscriptionID: sess.SubscriptionID()}})
	return jsonrpc.NewResult(id, res)
}
