package mcp

import (
	"encoding/json"

	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Params is a request's params read once, right after the parse: the
// members the gateway acts on, as raw sub-slices of the params (nil when
// absent), and the members of its _meta. Everything below the edge reads
// the request here and never the bytes again, except to forward them
// (ForwardParams). Made by ReadParams; the zero value is a request
// without params.
type Params struct {
	// Raw is the params as parsed.
	Raw json.RawMessage
	// Target is where the method names what it is routed by (TargetOf);
	// HasTarget is false for a method that names none. Name is that
	// member's string as sent; NameOK is false when it is missing or not
	// a string.
	Target    Target
	HasTarget bool
	Name      string
	NameOK    bool
	// Arguments, Cursor, Task and RequestState are those members' raw
	// values; State is requestState's string.
	Arguments, Cursor, Task, RequestState json.RawMessage
	State                                 string
	// Meta is _meta's raw value and MetaMembers its members, with offsets
	// in Meta. ProgressToken is _meta.progressToken (nil: none, or null).
	Meta          json.RawMessage
	MetaMembers   []rawjson.Member
	ProgressToken json.RawMessage
	// HopKeys: _meta holds a per-hop key (IsHopKey), or a key with an
	// escape that could spell one.
	HopKeys bool
	// The 2026-07-28 per-request keys of _meta: version (VersionOK when it
	// is a string), client capabilities and info, log level.
	Version      string
	VersionOK    bool
	Capabilities json.RawMessage
	ClientInfo   json.RawMessage
	LogLevel     string
}

// ReadParams reads params once (one rawjson.Scan of them and their
// _meta). A target behind a nested path (completion/complete's ref) is
// read from its member.
func ReadParams(method string, params json.RawMessage) *Params {
	p := new(Params)
	p.Read(method, params)
	return p
}

// Read is ReadParams into p, which a caller may keep on its stack.
func (p *Params) Read(method string, params json.RawMessage) {
	*p = Params{Raw: params}
	if len(params) == 0 || params[0] != '{' {
		return
	}
	p.Target, p.HasTarget = targetOfMethod(method)
	var field string
	if p.HasTarget && len(p.Target.Path) == 1 {
		field = p.Target.Path[0]
	}
	var ref json.RawMessage
	_ = rawjson.Scan(params, "_meta", func(m rawjson.Member) {
		v := params[m.Start:m.End]
		if field != "" && m.Key == field {
			p.Name, p.NameOK = stringOf(v)
			return
		}
		switch m.Key {
		case "arguments":
			p.Arguments = v
		case "cursor":
			p.Cursor = v
		case "task":
			p.Task = v
		case "requestState":
			p.RequestState = v
			p.State, _ = stringOf(v)
		case "_meta":
			p.Meta = v
		case "ref":
			ref = v
		}
	}, func(m rawjson.Member) {
		p.MetaMembers = append(p.MetaMembers, m)
		v := p.Meta[m.Start:m.End]
		if IsHopKey(m.Key) || hasEscape(p.Meta[m.KeyStart:m.Start]) {
			p.HopKeys = true
		}
		switch m.Key {
		case "progressToken":
			if string(v) != "null" {
				p.ProgressToken = v
			}
		case MetaProtocolVersion:
			p.Version, p.VersionOK = stringOf(v)
		case MetaClientCapabilities:
			p.Capabilities = v
		case MetaClientInfo:
			p.ClientInfo = v
		case MetaLogLevel:
			p.LogLevel, _ = stringOf(v)
		}
	})
	if method == MethodCompletionComplete && ref != nil {
		// Routed by ref.type: the one method whose target is nested.
		p.Target, p.HasTarget = TargetOf(method, params)
		if p.HasTarget {
			p.Name, p.NameOK = rawjson.GetString(ref, p.Target.Path[1])
		}
	}
}

// targetOfMethod is TargetOf for the methods whose target does not depend
// on the params.
func targetOfMethod(method string) (Target, bool) {
	if method == MethodCompletionComplete {
		return Target{}, false
	}
	return TargetOf(method, nil)
}

func stringOf(v []byte) (string, bool) { return rawjson.String(v) }

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// ForwardView is what a forwarder needs of a request's params to edit
// them without reading them again (Params.ForwardView): Meta is _meta's
// raw value (nil: none), MetaMembers its members with offsets in Meta;
// Task says the params carry task (a task-augmented call).
type ForwardView struct {
	Meta          json.RawMessage
	MetaMembers   []rawjson.Member
	ProgressToken json.RawMessage
	HopKeys       bool
	Task          bool
	// Read: the view was made (the zero ForwardView says nothing).
	Read bool
}

// ForwardView is p for a forwarder (a value: it holds no pointer to p).
func (p *Params) ForwardView() ForwardView {
	return ForwardView{Meta: p.Meta, MetaMembers: p.MetaMembers, ProgressToken: p.ProgressToken, HopKeys: p.HopKeys, Task: p.Task != nil, Read: true}
}

// Stateless reports whether the params say they are a 2026-07-28
// request's: their _meta names a protocol version.
func (p *Params) Stateless() bool {
	for _, m := range p.MetaMembers {
		if m.Key == MetaProtocolVersion {
			return true
		}
	}
	return false
}
