// Package mcp holds the Model Context Protocol facts both sides of the
// gateway share: protocol revisions, method names and the one table of
// what the gateway knows about each method (methods.go), error codes and
// the small typed views of handshake messages the gateway must read.
// Payloads the gateway forwards are never decoded into these types.
package mcp

import "encoding/json"

// Per-request _meta keys of the stateless revisions.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// Stateless-revision methods and headers.
const (
	MethodServerDiscover           = "server/discover"
	MethodSubscriptionsListen      = "subscriptions/listen"
	NotificationSubscriptionsAcked = "notifications/subscriptions/acknowledged"
	HeaderMethod                   = "Mcp-Method"
	HeaderName                     = "Mcp-Name"
)

// Method names the gateway itself interprets.
const (
	MethodInitialize             = "initialize"
	MethodPing                   = "ping"
	MethodToolsList              = "tools/list"
	MethodToolsCall              = "tools/call"
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodResourcesList          = "resources/list"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodResourcesRead          = "resources/read"
	MethodResourcesSubscribe     = "resources/subscribe"
	MethodResourcesUnsubscribe   = "resources/unsubscribe"
	MethodCompletionComplete     = "completion/complete"
	MethodLoggingSetLevel        = "logging/setLevel"
	NotificationInitialized      = "notifications/initialized"
	NotificationCancelled        = "notifications/cancelled"
	NotificationProgress         = "notifications/progress"
	NotificationMessage          = "notifications/message"
	NotificationToolsListChanged = "notifications/tools/list_changed"
	NotificationPromptsChanged   = "notifications/prompts/list_changed"
	NotificationResourcesChanged = "notifications/resources/list_changed"
	NotificationResourceUpdated  = "notifications/resources/updated"
	MethodRootsList              = "roots/list"
	MethodSamplingCreateMessage  = "sampling/createMessage"
	MethodElicitationCreate      = "elicitation/create"
	NotificationElicitationDone  = "notifications/elicitation/complete" // 2025-11-25: a URL-mode elicitation finished
	NotificationRootsListChanged = "notifications/roots/list_changed"
	MethodTasksGet               = "tasks/get"
	MethodTasksResult            = "tasks/result" // 2025-11-25 only
	MethodTasksList              = "tasks/list"   // 2025-11-25 only
	MethodTasksCancel            = "tasks/cancel"
	MethodTasksUpdate            = "tasks/update"             // the 2026-07-28 extension only
	MethodSkillsList             = "skills/list"              // the skills extension
	MethodSkillsGet              = "skills/get"               // the skills extension
	MethodResourcesDirectoryRead = "resources/directory/read" // the skills extension's directoryRead
	NotificationTasksStatus      = "notifications/tasks/status"
	HeaderSessionID              = "Mcp-Session-Id"
	HeaderProtocolVersion        = "Mcp-Protocol-Version"
	ContentTypeJSON              = "application/json"
	ContentTypeEventStream       = "text/event-stream"
)

// The skills extension (SEP-2640): a server that declares it under
// capabilities.extensions lists skills (skills/list, paginated), returns
// one by its SKILL.md URI (skills/get) and, with directoryRead: true,
// lists a skill directory's children (resources/directory/read). The
// files themselves are resources, read with resources/read.
const (
	// ExtensionSkills names the skills extension.
	ExtensionSkills = "io.modelcontextprotocol/skills"
	// SkillsDirectoryRead is the extension setting that offers
	// resources/directory/read.
	SkillsDirectoryRead = "directoryRead"
)

// NotFoundIsInvalidParams reports whether method answers a URI it does
// not serve with -32602 on every revision, not the pre-2026 -32002: the
// skills extension's methods say so.
func NotFoundIsInvalidParams(method string) bool { return Method(method).NotFoundInvalidParams }

// The tasks utility: 2025-11-25 has it in core (the tasks capability,
// params.task on tools/call, tasks/get, tasks/result, tasks/list,
// tasks/cancel); 2026-07-28 moves it to an extension (declared under
// capabilities.extensions, server-directed creation with resultType "task",
// tasks/get inlining the result, tasks/update, tasks/cancel).
const (
	// ExtensionTasks names the 2026-07-28 tasks extension.
	ExtensionTasks = "io.modelcontextprotocol/tasks"
	// MetaRelatedTask is the _meta key that ties a message to its task.
	MetaRelatedTask = "io.modelcontextprotocol/related-task"
	// MetaModelImmediateResponse is a CreateTaskResult's text for the model.
	MetaModelImmediateResponse = "io.modelcontextprotocol/model-immediate-response"
)

// MCP-specific error codes (JSON-RPC server-error range).
const (
	// CodeResourceNotFound is the pre-2026 code for an unknown resource URI.
	CodeResourceNotFound = -32002
	// CodeRequestTimeout is what the SDKs use for a request that got no answer in time.
	CodeRequestTimeout = -32001
	// CodeUpstreamUnavailable marks a call whose upstream is down or unreachable
	// (implementation-defined range -32000..-32019).
	CodeUpstreamUnavailable = -32003
	// CodeRateLimited refuses a request over a rate limit or a configured
	// bound that is full; data carries retryAfterSeconds, and a client
	// handles both alike: it waits and retries.
	CodeRateLimited = -32004
	// CodeEventsPurged: a Last-Event-ID replay asked for events the replay
	// log no longer holds; the stream's request is answered with it.
	CodeEventsPurged = -32005
	// CodeHeaderMismatch: an Mcp-* header disagrees with the body (2026-07-28).
	CodeHeaderMismatch = -32020
	// CodeMissingRequiredClientCapability: the request needs a capability the client did not declare.
	CodeMissingRequiredClientCapability = -32021
	// CodeUnsupportedProtocolVersion: the requested revision is not spoken here.
	CodeUnsupportedProtocolVersion = -32022
	// CodeURLElicitationRequired (URLElicitationRequiredError, 2025-11-25):
	// the request needs the user to visit a URL first; data.elicitations
	// lists the URL-mode elicitations (mode, elicitationId, url, message).
	CodeURLElicitationRequired = -32042
)

// Implementation is the clientInfo/serverInfo object.
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// InitializeParams is the part of initialize's params the gateway reads.
type InitializeParams struct {
	ProtocolVersion Revision        `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ClientInfo      json.RawMessage `json:"clientInfo"`
}

// InitializeResult is the part of initialize's result the gateway reads or writes.
type InitializeResult struct {
	ProtocolVersion Revision        `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ServerInfo      json.RawMessage `json:"serverInfo"`
	Instructions    string          `json:"instructions,omitempty"`
}
