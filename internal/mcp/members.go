package mcp

import (
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// One reading of a request (DESIGN.md invariant 6): what the policy and
// the audit judge must be what the upstream runs. jsonrpc's Parse already
// refuses a member named twice anywhere in a message; this file lists the
// members of params the gateway itself reads, where it reads them, so
// that a case variant of one of them — which the gateway does not read
// but a case-insensitive decoder (Go's encoding/json matches struct fields
// with strings.EqualFold) would take for it — is refused before policy,
// on every transport, in the same pass.

// capabilityMembers are the client capabilities the gateway reads (the
// session's declared capabilities, callstream.go lacks and host
// capviews.go): sampling, roots, and elicitation with its modes.
var capabilityMembers = rawjson.NewMembers(map[string]*rawjson.Members{
	"sampling":    nil,
	"roots":       nil,
	"elicitation": rawjson.NewMembers(map[string]*rawjson.Members{"form": nil, "url": nil}),
})

// InterpretedParams is every member of a request's or notification's
// params the gateway reads, with the members it reads inside them. Add a
// member here when a new reader of params appears.
var InterpretedParams = rawjson.NewMembers(map[string]*rawjson.Members{
	// The target of a routed request (TargetOf): tools/call and
	// prompts/get name, resources/read|subscribe|unsubscribe uri; the
	// policy guard, the audit, the catalog's name rewrite, the Mcp-Name
	// header check and the bridge's parked call all read them.
	"name": nil,
	"uri":  nil,
	// The tasks methods (tasks/get, tasks/result, tasks/cancel,
	// tasks/update) are routed by taskId: the gateway opens its own sealed
	// id there, and a TaskId beside it would name another task upstream.
	"taskId": nil,
	// completion/complete is routed by ref.type and ref.name or ref.uri.
	"ref": rawjson.NewMembers(map[string]*rawjson.Members{"type": nil, "name": nil, "uri": nil}),
	// What CEL conditions and the audit see of a call (router guard.go,
	// audit.go), and the Mcp-Param-* header check (paramheaders.go).
	"arguments": nil,
	// The merged lists' page cursor (host catalog.go).
	"cursor": nil,
	// Task-augmented requests (2025-11-25): a task changes what the
	// upstream answers (a task handle, not a result).
	"task": nil,
	// logging/setLevel (dispatch.go, decoded into a struct).
	"level": nil,
	// initialize (negotiateInitialize, decoded into InitializeParams).
	"protocolVersion": nil,
	"capabilities":    capabilityMembers,
	"clientInfo":      nil,
	// notifications/cancelled (router.go, decoded into a struct).
	"requestId": nil,
	// 2026-07-28 retries of an input_required call (router bridge.go).
	"requestState":   nil,
	"inputResponses": nil,
	// subscriptions/listen (stateless.go, decoded into listenFilter).
	"notifications": rawjson.NewMembers(map[string]*rawjson.Members{
		"toolsListChanged":      nil,
		"promptsListChanged":    nil,
		"resourcesListChanged":  nil,
		"resourceSubscriptions": nil,
	}),
	// The per-request _meta: the 2026-07-28 hop keys (stateless.go,
	// hop.go, the upstream client's modernMeta), the progress token the
	// client replaces (client.go) and the trace context (client trace.go).
	"_meta": rawjson.NewMembers(map[string]*rawjson.Members{
		MetaProtocolVersion:    nil,
		MetaClientInfo:         nil,
		MetaClientCapabilities: capabilityMembers,
		MetaLogLevel:           nil,
		MetaSubscriptionID:     nil,
		"progressToken":        nil,
		"traceparent":          nil,
		"tracestate":           nil,
		"baggage":              nil,
	}),
})

// parser reads messages for the gateway: the JSON-RPC envelope and the
// members of params above.
var parser = jsonrpc.NewParser(InterpretedParams, methodsWhere(func(m MethodInfo) bool { return m.Intern })...)

// Parse reads one JSON-RPC message from a client, as jsonrpc.Parse does,
// and also refuses (-32600, naming the member and the fix) a case variant
// of any member in InterpretedParams. Every downstream transport parses
// with it, so nothing the gateway judges is read another way upstream.
func Parse(data []byte) (*jsonrpc.Message, error) { return parser.Parse(data) }
