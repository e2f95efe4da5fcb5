package mcp

// MethodInfo is everything the gateway knows about one method apart from
// its behaviour: where a request's target sits, which headers mirror it,
// what it needs of the server, how it is judged, recorded and counted.
// Each package that treats methods differently asks here (Method) rather
// than keeping its own list, so a fact cannot be forgotten in one place
// and present in another: TestMethodTableComplete fails when a method
// lacks a fact its kind requires.
//
// Adding a routed method, say a hypothetical resources/watch (named by
// its uri), touches these files and no others:
//   - internal/mcp/mcp.go: its name constant;
//   - internal/mcp/methods.go: its row — target, Label, and whichever of
//     NameHeader, Capability, CallerView, SessionOnly, Audited, PerName,
//     Interactive apply;
//   - its behaviour, only where it differs from a forwarded request: a
//     case in internal/router/core/dispatch.go if the gateway answers it
//     itself, one in internal/catalog/rewrite.go if its result names
//     URIs, a member in members.go if its params carry one the gateway
//     reads that is not listed yet.
//
// Everything else follows the row: the strict parser, routing and the
// target's resolution, the policy guard and its kind, the audit, the
// rate limits, the metric label and per-name series, tracing's target,
// the Mcp-Name header on both sides, stateless legality, the caller's
// capability view upstream and the required-capability refusal.
type MethodInfo struct {
	// Name is the method as written on the wire.
	Name string
	// From is who sends it.
	From Sender
	// Notification: it has no id and gets no answer.
	Notification bool

	// target is the params member a routed request names what it is
	// routed by (TargetOf); zero for a method that is not routed.
	// refTarget: the target depends on params.ref.type (completion).
	target    Target
	refTarget bool

	// NameHeader is the params member that the 2026-07-28 Mcp-Name header
	// mirrors; "" when the method has no such header.
	NameHeader string
	// Capability is what the server a routed request reaches must have
	// declared, beyond having listed the target (nil: nothing more).
	Capability *ServerCapability
	// NotFoundInvalidParams: a target the server does not serve is
	// answered -32602 on every revision, not the pre-2026 -32002.
	NotFoundInvalidParams bool
	// CallerView: the request goes over a connection that declares the
	// caller's own capabilities (host.CallOnly); otherwise over the shared
	// connection, where subscriptions and settings are undone.
	CallerView bool
	// SessionOnly: the method exists only in the session revisions; a
	// 2026-07-28 stateless request for it is refused as not existing.
	SessionOnly bool
	// Audited: the audit log records every request of the method; other
	// routed requests are recorded only when refused.
	Audited bool
	// Arguments: params.arguments are the call's arguments, which policy
	// conditions and the audit see.
	Arguments bool
	// Interactive: a call that may run long and ask its caller (sampling,
	// elicitation) while it does; it may be moved to a connection of its
	// own (host interactive.go).
	Interactive bool
	// PerName: requests are counted per target name (metrics' per-name
	// families, by the target's kind).
	PerName bool
	// Label: the method is a value of the metrics' method label; any
	// other method is counted as "other".
	Label bool
	// Intern: the strict parser hands out the method string from a fixed
	// set (no allocation per message) — the hot methods.
	Intern bool
	// List is set for a merged list (each upstream's list, merged).
	List *ListInfo
	// ListChanged is set for a list_changed notification: the capability
	// whose lists it announces a change of ("tools", "prompts",
	// "resources").
	ListChanged string
	// ClientCapability is the capability a server→client request needs the
	// client to have declared (its top-level member); "" for none.
	ClientCapability string
}

// Sender is who sends a method.
type Sender uint8

// Senders.
const (
	FromClient Sender = iota + 1
	FromServer
	FromEither // ping, cancellation, progress
)

// ListInfo describes a merged list.
type ListInfo struct {
	// Key is the result member holding the items ("tools").
	Key string
	// Field is the item member that names an item ("name", "uri").
	Field string
	// URI: items are named by URI (or URI template).
	URI bool
	// Capability is the server capability offering the list (top level,
	// or an extension name).
	Capability string
	// Kind is how the policy judges items ("tool", "prompt", "resource").
	Kind Kind
	// ChangedBy is the list_changed notification announcing a change.
	ChangedBy string
}

// Routed reports whether requests of the method are forwarded to the one
// upstream that owns their target.
func (m MethodInfo) Routed() bool { return m.target.Kind != "" || m.refTarget }

var skillsCapability = ServerCapability{Path: []string{"extensions", ExtensionSkills}, What: "skills"}

// methods is the table. Order is the metric label order.
var methods = []MethodInfo{
	{Name: MethodInitialize, From: FromClient, SessionOnly: true, Label: true, Intern: true},
	{Name: MethodPing, From: FromEither, SessionOnly: true, Label: true, Intern: true},
	{Name: MethodToolsList, From: FromClient, Label: true, Intern: true,
		List: &ListInfo{Key: "tools", Field: "name", Capability: "tools", Kind: KindTool, ChangedBy: NotificationToolsListChanged}},
	{Name: MethodToolsCall, From: FromClient, target: targetToolName, NameHeader: "name", CallerView: true,
		Audited: true, Arguments: true, Interactive: true, PerName: true, Label: true, Intern: true},
	{Name: MethodPromptsList, From: FromClient, Label: true, Intern: true,
		List: &ListInfo{Key: "prompts", Field: "name", Capability: "prompts", Kind: KindPrompt, ChangedBy: NotificationPromptsChanged}},
	{Name: MethodPromptsGet, From: FromClient, target: targetPromptName, NameHeader: "name", CallerView: true,
		Audited: true, Arguments: true, Interactive: true, PerName: true, Label: true, Intern: true},
	{Name: MethodResourcesList, From: FromClient, Label: true, Intern: true,
		List: &ListInfo{Key: "resources", Field: "uri", URI: true, Capability: "resources", Kind: KindResource, ChangedBy: NotificationResourcesChanged}},
	{Name: MethodResourcesTemplatesList, From: FromClient, Label: true,
		List: &ListInfo{Key: "resourceTemplates", Field: "uriTemplate", URI: true, Capability: "resources", Kind: KindResource, ChangedBy: NotificationResourcesChanged}},
	{Name: MethodResourcesRead, From: FromClient, target: targetURI, NameHeader: "uri", CallerView: true,
		Audited: true, Interactive: true, PerName: true, Label: true, Intern: true},
	{Name: MethodResourcesSubscribe, From: FromClient, target: targetURI, SessionOnly: true, Label: true,
		Capability: &ServerCapability{Path: []string{"resources", "subscribe"}, What: "resource subscriptions"}},
	{Name: MethodResourcesUnsubscribe, From: FromClient, target: targetURI, SessionOnly: true, Label: true,
		Capability: &ServerCapability{Path: []string{"resources", "subscribe"}, What: "resource subscriptions"}},
	{Name: MethodCompletionComplete, From: FromClient, refTarget: true, CallerView: true, Label: true,
		Capability: &ServerCapability{Path: []string{"completions"}, What: "completions"}},
	{Name: MethodLoggingSetLevel, From: FromClient, SessionOnly: true, Label: true},
	{Name: MethodServerDiscover, From: FromClient, Label: true},
	{Name: MethodSubscriptionsListen, From: FromClient, Label: true},
	// The tasks methods are routed by the gateway's own task id and reach
	// the connection that created their task (CallerView). tasks/get, a
	// poll, is audited only when refused.
	{Name: MethodTasksGet, From: FromClient, target: targetTaskID, NameHeader: "taskId", CallerView: true, Label: true},
	// tasks/result is 2025-11-25 only: no routing header.
	{Name: MethodTasksResult, From: FromClient, target: targetTaskID, CallerView: true, Audited: true, Label: true},
	// tasks/list (2025-11-25) is the caller's tasks, merged by the catalog
	// (catalog tasks.go), not a merged list of this table.
	{Name: MethodTasksList, From: FromClient, CallerView: true, Label: true},
	{Name: MethodTasksCancel, From: FromClient, target: targetTaskID, NameHeader: "taskId", CallerView: true, Audited: true, Label: true},
	{Name: MethodTasksUpdate, From: FromClient, target: targetTaskID, NameHeader: "taskId", Audited: true, Label: true},
	{Name: MethodSkillsList, From: FromClient, Label: true,
		// A skill is judged by its SKILL.md URI, like a resource; skill
		// files are resources, so resources/list_changed announces them.
		List: &ListInfo{Key: "skills", Field: "uri", URI: true, Capability: ExtensionSkills, Kind: KindResource, ChangedBy: NotificationResourcesChanged}},
	// A skill is named by its SKILL.md URI and a skill directory by its
	// URI: both are resources to routing and policy. A listed skill file
	// may come from an upstream's resources/list while the upstream does
	// not serve skills: hence the capability.
	{Name: MethodSkillsGet, From: FromClient, target: targetURI, Label: true, Capability: &skillsCapability, NotFoundInvalidParams: true},
	{Name: MethodResourcesDirectoryRead, From: FromClient, target: targetURI, Label: true, NotFoundInvalidParams: true,
		Capability: &ServerCapability{Path: []string{"extensions", ExtensionSkills, SkillsDirectoryRead}, What: "skill directory reads"}},

	// Server→client requests: what the client must have declared.
	{Name: MethodSamplingCreateMessage, From: FromServer, ClientCapability: "sampling"},
	{Name: MethodRootsList, From: FromServer, ClientCapability: "roots"},
	{Name: MethodElicitationCreate, From: FromServer, ClientCapability: "elicitation"},

	// Notifications.
	{Name: NotificationInitialized, From: FromClient, Notification: true, Intern: true},
	{Name: NotificationCancelled, From: FromEither, Notification: true, Intern: true},
	{Name: NotificationProgress, From: FromEither, Notification: true, Intern: true},
	{Name: NotificationMessage, From: FromServer, Notification: true},
	{Name: NotificationToolsListChanged, From: FromServer, Notification: true, ListChanged: "tools"},
	{Name: NotificationPromptsChanged, From: FromServer, Notification: true, ListChanged: "prompts"},
	{Name: NotificationResourcesChanged, From: FromServer, Notification: true, ListChanged: "resources"},
	{Name: NotificationResourceUpdated, From: FromServer, Notification: true},
	{Name: NotificationTasksStatus, From: FromServer, Notification: true},
	{Name: NotificationElicitationDone, From: FromServer, Notification: true},
	{Name: NotificationSubscriptionsAcked, From: FromServer, Notification: true},
	{Name: NotificationRootsListChanged, From: FromClient, Notification: true},
}

// methodIndex finds a row by name.
var methodIndex = func() map[string]int {
	m := make(map[string]int, len(methods))
	for i := range methods {
		m[methods[i].Name] = i
	}
	return m
}()

// Method returns the facts of method (a copy of its row); for a method
// not in the table, the zero row: every fact false (not routed, not
// labelled, …). Its List and Capability are shared: read only.
func Method(name string) MethodInfo {
	if i, ok := methodIndex[name]; ok {
		return methods[i]
	}
	return MethodInfo{}
}

// methodsWhere returns the names of the rows where keep holds, in table
// order.
func methodsWhere(keep func(MethodInfo) bool) []string {
	var out []string
	for i := range methods {
		if keep(methods[i]) {
			out = append(out, methods[i].Name)
		}
	}
	return out
}

// LabelMethods returns the values of the metrics' method label, in table
// order (a new slice).
func LabelMethods() []string { return methodsWhere(func(m MethodInfo) bool { return m.Label }) }

// ListMethods returns the merged list methods, in table order.
func ListMethods() []string { return methodsWhere(func(m MethodInfo) bool { return m.List != nil }) }

// ListChangedNotifications returns the list_changed notifications that
// tell a client to read its lists again (tools, prompts, resources).
func ListChangedNotifications() []string {
	return methodsWhere(func(m MethodInfo) bool { return m.ListChanged != "" })
}

// IsListChanged reports whether method is one of ListChangedNotifications.
func IsListChanged(method string) bool { return Method(method).ListChanged != "" }

// ListsChangedBy returns the merged lists that the list_changed
// notification method announces a change of, in table order.
func ListsChangedBy(method string) []string {
	return methodsWhere(func(m MethodInfo) bool { return m.List != nil && m.List.ChangedBy == method })
}
