package telemetry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Span names and attributes follow the OpenTelemetry semantic conventions
// for MCP (mcp.*, with gen_ai.* for tools and prompts): a span is named
// "{mcp.method.name} {target}" where the target is a tool or prompt name
// (never a resource URI, which is an attribute); a server span covers one
// downstream request, a client span one upstream call. What the
// conventions do not name is under mcpgw.*. Arguments, results and
// credentials are never recorded; a session id only as a hash, since it is
// a bearer value.

// Attribute keys.
const (
	KeyMethod          = attribute.Key("mcp.method.name")
	KeySessionID       = attribute.Key("mcp.session.id") // a hash of the id: SessionID
	KeyProtocolVersion = attribute.Key("mcp.protocol.version")
	KeyResourceURI     = attribute.Key("mcp.resource.uri")
	KeyToolName        = attribute.Key("gen_ai.tool.name")
	KeyPromptName      = attribute.Key("gen_ai.prompt.name")
	KeyOperationName   = attribute.Key("gen_ai.operation.name")
	KeyRequestID       = attribute.Key("jsonrpc.request.id")
	KeyStatusCode      = attribute.Key("rpc.response.status_code")
	KeyErrorType       = attribute.Key("error.type")
	KeyTransport       = attribute.Key("network.transport")
	KeyProtocolName    = attribute.Key("network.protocol.name")
	KeyUserID          = attribute.Key("user.id") // the principal's subject

	KeyUpstream     = attribute.Key("mcpgw.upstream")      // the upstream serving the request
	KeyRoute        = attribute.Key("mcpgw.route")         // the downstream route path
	KeyOutcome      = attribute.Key("mcpgw.outcome")       // ok, error, invalid, unavailable, timeout, denied, rate_limited
	KeyUpstreamName = attribute.Key("mcpgw.upstream.name") // the name the upstream knows the target by
)

// Event names.
const (
	// EventUpstreamRequest: during a call, the upstream sent a
	// server→client request (sampling, elicitation, roots): attribute
	// mcp.method.name is its method.
	EventUpstreamRequest = "mcpgw.upstream_request"
	// EventResent: the upstream had lost its session, so the gateway
	// initialized again and sent the request once more (it was not
	// processed).
	EventResent = "mcpgw.resent"
	// EventBridgeInputRequired / EventBridgeResumed: a bridged call (a
	// 2026-07-28 client, a legacy upstream) returned input_required to its
	// client, and the client's retry resumed it.
	EventBridgeInputRequired = "mcpgw.bridge.input_required"
	EventBridgeResumed       = "mcpgw.bridge.resumed"
)

// ExecuteTool is gen_ai.operation.name for tools/call.
const ExecuteTool = "execute_tool"

// SpanName is "{method} {target}", or the method alone when the target is
// a resource URI (high cardinality) or there is none.
func SpanName(method string, kind mcp.Kind, name string) string {
	if name == "" || kind == mcp.KindResource {
		return method
	}
	return method + " " + name
}

// TargetAttributes name what a request is about: the tool (and
// gen_ai.operation.name execute_tool), the prompt, or the resource URI.
func TargetAttributes(method string, kind mcp.Kind, name string, into []attribute.KeyValue) []attribute.KeyValue {
	into = append(into, KeyMethod.String(method))
	if name == "" {
		return into
	}
	switch kind {
	case mcp.KindTool:
		into = append(into, KeyToolName.String(name))
		if method == mcp.MethodToolsCall {
			into = append(into, KeyOperationName.String(ExecuteTool))
		}
	case mcp.KindPrompt:
		into = append(into, KeyPromptName.String(name))
	case mcp.KindResource:
		into = append(into, KeyResourceURI.String(name))
	}
	return into
}

// Target reads what a request is about from its params (mcp.TargetOf).
func Target(method string, params []byte) (mcp.Kind, string) {
	t, ok := mcp.TargetOf(method, params)
	if !ok {
		return "", ""
	}
	name, err := rawjson.GetPath(params, t.Path)
	if err != nil {
		return t.Kind, ""
	}
	return t.Kind, name
}

// SessionID is what mcp.session.id records of a session id: the first 16
// bytes of its SHA-256, in hex. The id itself is a bearer value (whoever
// holds it, with the owner's credentials, uses the session), so it never
// leaves the gateway; equal hashes still join the spans of one session.
func SessionID(id string) string {
	if id == "" {
		return ""
	}
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:16])
}

// RequestID is jsonrpc.request.id: the id's string form (a JSON string
// without its quotes).
func RequestID(id jsonrpc.ID) string {
	s := string(id)
	if len(s) >= 2 && s[0] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// EndResponse records how resp ended a request or call and ends span: a
// JSON-RPC error sets error.type and rpc.response.status_code to its code
// and the status to Error with its message; a tools/call result with
// isError true sets error.type tool_error.
func EndResponse(span trace.Span, method string, resp *jsonrpc.Message) {
	if span == nil {
		return
	}
	switch {
	case resp == nil:
	case resp.Error != nil:
		code := strconv.Itoa(resp.Error.Code)
		span.SetAttributes(KeyErrorType.String(code), KeyStatusCode.String(code))
		span.SetStatus(codes.Error, resp.Error.Message)
	case method == mcp.MethodToolsCall:
		if b, ok := rawjson.Get(resp.Result, "isError"); ok && bytes.Equal(b, []byte("true")) {
			span.SetAttributes(KeyErrorType.String("tool_error"))
			span.SetStatus(codes.Error, "the tool returned isError: true")
		}
	}
	span.End()
}

// EndError records a call that got no response (errType: timeout,
// cancelled, transport, unavailable) and ends span.
func EndError(span trace.Span, errType string, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(KeyErrorType.String(errType))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetStatus(codes.Error, errType)
	}
	span.End()
}

// Traceparent is the W3C traceparent of sc.
func Traceparent(sc trace.SpanContext) string {
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := sc.TraceFlags()
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(flags)})
	return string(b[:])
}

// RemoteContext parses a W3C traceparent (and its tracestate) into the
// remote parent it names; ok is false for an invalid one.
func RemoteContext(traceparent, tracestate string) (trace.SpanContext, bool) {
	if len(traceparent) != 55 || traceparent[2] != '-' || traceparent[35] != '-' || traceparent[52] != '-' || traceparent[:2] == "ff" || strings.ToLower(traceparent) != traceparent {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	if _, err := hex.Decode(cfg.TraceID[:], []byte(traceparent[3:35])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(cfg.SpanID[:], []byte(traceparent[36:52])); err != nil {
		return trace.SpanContext{}, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(traceparent[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & trace.FlagsSampled
	cfg.Remote = true
	if tracestate != "" {
		if ts, err := trace.ParseTraceState(tracestate); err == nil {
			cfg.TraceState = ts
		}
	}
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}
