package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// Tool search end to end (docs/protocol.md, "Tool search"): a route over
// about a thousand tools from 27 upstreams in search mode.

// fixtureTool is one tool of a fixture upstream: its name, description and
// parameters ("name: description" each), modeled on real MCP servers.
type fixtureTool struct {
	name, desc string
	params     []string
}

// realistic are upstreams modeled on well-known MCP servers' tools.
var realistic = map[string][]fixtureTool{
	"filesystem": {
		{"read_file", "Read the complete contents of a file from the file system. Handles various text encodings.", []string{"path: Path of the file to read"}},
		{"read_multiple_files", "Read the contents of multiple files simultaneously. More efficient than reading files one by one.", []string{"paths: Paths of the files"}},
		{"write_file", "Create a new file or completely overwrite an existing file with new content.", []string{"path: Where to write", "content: Text to write"}},
		{"edit_file", "Make line-based edits to a text file. Each edit replaces exact line sequences with new content.", []string{"path: File to edit", "edits: List of edits", "dryRun: Preview changes"}},
		{"create_directory", "Create a new directory or ensure a directory exists, including nested directories.", []string{"path: Directory to create"}},
		{"list_directory", "Get a detailed listing of all files and directories in a specified path.", []string{"path: Directory to list"}},
		{"directory_tree", "Get a recursive tree view of files and directories as a JSON structure.", []string{"path: Root directory"}},
		{"move_file", "Move or rename files and directories.", []string{"source: Current path", "destination: New path"}},
		{"search_files", "Recursively search for files and directories matching a pattern.", []string{"path: Where to start", "pattern: Glob pattern"}},
		{"get_file_info", "Retrieve detailed metadata about a file or directory: size, creation time, permissions.", []string{"path: File or directory"}},
	},
	"github": {
		{"create_issue", "Create a new issue in a GitHub repository.", []string{"owner: Repository owner", "repo: Repository name", "title: Issue title", "body: Issue body", "labels: Labels to apply"}},
		{"list_issues", "List issues in a GitHub repository with filtering options.", []string{"owner: Repository owner", "repo: Repository name", "state: open, closed or all"}},
		{"update_issue", "Update an existing issue in a GitHub repository.", []string{"owner: Repository owner", "repo: Repository name", "issue_number: Issue to update", "state: New state"}},
		{"add_issue_comment", "Add a comment to an existing issue.", []string{"owner: Repository owner", "repo: Repository name", "issue_number: Issue number", "body: Comment text"}},
		{"create_pull_request", "Create a new pull request in a GitHub repository.", []string{"owner: Repository owner", "repo: Repository name", "title: PR title", "head: Branch with changes", "base: Branch to merge into"}},
		{"merge_pull_request", "Merge a pull request.", []string{"owner: Repository owner", "repo: Repository name", "pull_number: Pull request number", "merge_method: merge, squash or rebase"}},
		{"list_pull_requests", "List and filter repository pull requests.", []string{"owner: Repository owner", "repo: Repository name"}},
		{"get_file_contents", "Get the contents of a file or directory from a GitHub repository.", []string{"owner: Repository owner", "repo: Repository name", "path: Path in the repository", "branch: Branch"}},
		{"create_or_update_file", "Create or update a single file in a GitHub repository.", []string{"owner: Repository owner", "repo: Repository name", "path: Path", "content: New content", "message: Commit message"}},
		{"create_repository", "Create a new GitHub repository in your account.", []string{"name: Repository name", "private: Whether private"}},
		{"fork_repository", "Fork a GitHub repository to your account or organization.", []string{"owner: Repository owner", "repo: Repository name"}},
		{"create_branch", "Create a new branch in a GitHub repository.", []string{"owner: Repository owner", "repo: Repository name", "branch: New branch name", "from_branch: Source branch"}},
		{"list_commits", "Get list of commits of a branch in a GitHub repository.", []string{"owner: Repository owner", "repo: Repository name", "sha: Branch or commit"}},
		{"search_code", "Search for code across GitHub repositories.", []string{"q: Search query"}},
		{"search_repositories", "Search for GitHub repositories.", []string{"query: Search query"}},
	},
	"gitlab": {
		{"create_issue", "Create a new issue in a GitLab project.", []string{"project_id: Project", "title: Issue title", "description: Issue description"}},
		{"create_merge_request", "Create a new merge request in a GitLab project.", []string{"project_id: Project", "source_branch: Branch with changes", "target_branch: Branch to merge into"}},
		{"list_projects", "List GitLab projects the user can access.", []string{"search: Filter by name"}},
		{"get_file_contents", "Get the contents of a file from a GitLab project.", []string{"project_id: Project", "file_path: Path"}},
	},
	"slack": {
		{"list_channels", "List public channels in the Slack workspace with pagination.", []string{"limit: Channels per page", "cursor: Pagination cursor"}},
		{"post_message", "Post a new message to a Slack channel.", []string{"channel_id: The channel to post to", "text: The message text"}},
		{"reply_to_thread", "Reply to a specific message thread in Slack.", []string{"channel_id: Channel", "thread_ts: Parent message timestamp", "text: Reply text"}},
		{"add_reaction", "Add a reaction emoji to a message.", []string{"channel_id: Channel", "timestamp: Message", "reaction: Emoji name"}},
		{"get_channel_history", "Get recent messages from a channel.", []string{"channel_id: Channel", "limit: How many messages"}},
		{"get_users", "Get a list of all users in the workspace with their basic profile information.", []string{"cursor: Pagination cursor"}},
	},
	"jira": {
		{"search_issues", "Search Jira issues using JQL (Jira Query Language).", []string{"jql: JQL query", "fields: Fields to return"}},
		{"get_issue", "Get details of a specific Jira issue including its fields and comments.", []string{"issue_key: Issue key, e.g. PROJ-123"}},
		{"create_issue", "Create a new Jira issue (ticket) in a project.", []string{"project_key: Project", "summary: Summary", "issue_type: Bug, Task or Story"}},
		{"transition_issue", "Transition a Jira issue to a new status (e.g. In Progress, Done).", []string{"issue_key: Issue key", "transition_id: Transition"}},
		{"add_comment", "Add a comment to a Jira issue.", []string{"issue_key: Issue key", "comment: Comment text"}},
		{"list_sprints", "List the sprints of a Jira board.", []string{"board_id: Board"}},
	},
	"postgres": {
		{"query", "Run a read-only SQL query against the PostgreSQL database.", []string{"sql: The SQL to run"}},
		{"list_tables", "List the tables in a database schema.", []string{"schema: Schema name"}},
		{"describe_table", "Show the columns, types and indexes of a table.", []string{"table: Table name"}},
		{"explain_query", "Show the execution plan of a SQL query.", []string{"sql: The SQL to explain"}},
	},
	"time": {
		{"get_current_time", "Get the current time in a specific timezone.", []string{"timezone: IANA timezone name"}},
		{"convert_time", "Convert a time between timezones.", []string{"source_timezone: From", "time: Time HH:MM", "target_timezone: To"}},
	},
	"puppeteer": {
		{"navigate", "Navigate the browser to a URL.", []string{"url: URL to open"}},
		{"screenshot", "Take a screenshot of the current page or a specific element.", []string{"name: Screenshot name", "selector: CSS selector"}},
		{"click", "Click an element on the page.", []string{"selector: CSS selector"}},
		{"fill", "Fill out an input field.", []string{"selector: CSS selector", "value: Value"}},
		{"evaluate", "Execute JavaScript in the browser console.", []string{"script: JavaScript code"}},
	},
	"fetch": {
		{"fetch", "Fetches a URL from the internet and extracts its contents as markdown.", []string{"url: URL to fetch", "max_length: Most characters to return", "raw: Return raw HTML"}},
	},
	"brave": {
		{"web_search", "Performs a web search using the Brave Search API, for general queries, news and articles.", []string{"query: Search query", "count: Number of results"}},
		{"local_search", "Searches for local businesses and places using Brave's Local Search API.", []string{"query: Local search query"}},
	},
	"calendar": {
		{"list_events", "List events of a Google Calendar in a time range.", []string{"calendar_id: Calendar", "time_min: Start", "time_max: End"}},
		{"create_event", "Create a calendar event with attendees and a time.", []string{"summary: Event title", "start: Start time", "end: End time", "attendees: Emails"}},
		{"delete_event", "Delete a calendar event.", []string{"event_id: Event"}},
		{"find_free_time", "Find free time slots across calendars.", []string{"calendars: Calendars", "duration: Minutes"}},
	},
	"gmail": {
		{"send_email", "Send an email message to recipients.", []string{"to: Recipients", "subject: Subject", "body: Body"}},
		{"search_emails", "Search emails in the mailbox with Gmail search syntax.", []string{"query: Gmail query"}},
		{"read_email", "Read the content of an email message.", []string{"message_id: Message"}},
	},
	"kubernetes": {
		{"list_pods", "List pods in a Kubernetes namespace.", []string{"namespace: Namespace"}},
		{"get_pod_logs", "Get the logs of a pod container.", []string{"namespace: Namespace", "pod: Pod name", "container: Container"}},
		{"scale_deployment", "Scale a deployment to a number of replicas.", []string{"namespace: Namespace", "name: Deployment", "replicas: Replica count"}},
		{"apply_manifest", "Apply a YAML manifest to the cluster.", []string{"manifest: YAML"}},
	},
	"stripe": {
		{"create_customer", "Create a customer in Stripe.", []string{"email: Email", "name: Name"}},
		{"create_payment_link", "Create a payment link for a price.", []string{"price: Price", "quantity: Quantity"}},
		{"create_refund", "Refund a payment intent, fully or partially.", []string{"payment_intent: Payment to refund", "amount: Amount in cents"}},
		{"list_invoices", "List invoices of a customer.", []string{"customer: Customer"}},
	},
	"s3": {
		{"list_buckets", "List the S3 buckets of the AWS account.", nil},
		{"put_object", "Upload an object (file) to an S3 bucket.", []string{"bucket: Bucket", "key: Object key", "body: Content"}},
		{"get_object", "Download an object from an S3 bucket.", []string{"bucket: Bucket", "key: Object key"}},
	},
	"sentry": {
		{"list_issues", "List error issues of a Sentry project, most frequent first.", []string{"project: Project slug", "query: Filter"}},
		{"get_issue_details", "Get the stack trace and details of a Sentry error event.", []string{"issue_id: Issue"}},
	},
	"memory": {
		{"create_entities", "Create multiple new entities in the knowledge graph.", []string{"entities: Entities with name, type and observations"}},
		{"create_relations", "Create relations between entities in the knowledge graph.", []string{"relations: From, to and relation type"}},
		{"add_observations", "Add new observations (facts) to existing entities in the knowledge graph, to remember them.", []string{"observations: Entity name and contents"}},
		{"search_nodes", "Search for nodes in the knowledge graph based on a query.", []string{"query: Search query"}},
		{"read_graph", "Read the entire knowledge graph.", nil},
	},
	"notion": {
		{"create_page", "Create a new page in a Notion database or as a child of a page.", []string{"parent_id: Parent", "title: Title", "content: Markdown content"}},
		{"search", "Search Notion pages and databases by title.", []string{"query: Text"}},
		{"update_page", "Update the properties of a Notion page.", []string{"page_id: Page", "properties: Properties"}},
	},
}

// searchQueries are what a model might ask, with the tool meant.
var searchQueries = []struct{ query, want string }{
	{"read a file", "filesystem__read_file"},
	{"create a github issue", "github__create_issue"},
	{"send a message to a slack channel", "slack__post_message"},
	{"run a SQL query on the database", "postgres__query"},
	{"list the files in a directory", "filesystem__list_directory"},
	{"open a pull request", "github__create_pull_request"},
	{"search jira tickets with JQL", "jira__search_issues"},
	{"move a jira ticket to done", "jira__transition_issue"},
	{"what time is it in Tokyo timezone", "time__get_current_time"},
	{"take a screenshot of the web page", "puppeteer__screenshot"},
	{"download a web page as markdown", "fetch__fetch"},
	{"search the web for news", "brave__web_search"},
	{"schedule a meeting on my calendar", "calendar__create_event"},
	{"show kubernetes pods", "kubernetes__list_pods"},
	{"refund a customer's payment", "stripe__create_refund"},
	{"upload a file to an S3 bucket", "s3__put_object"},
	{"show the stack trace of a sentry error", "sentry__get_issue_details"},
	{"remember a fact about the user", "memory__add_observations"},
	{"rename a file", "filesystem__move_file"},
	{"what columns does a table have", "postgres__describe_table"},
}

// filler adds upstreams of plausible tools that share the realistic
// ones' words, so that ranking has to tell them apart.
func filler(n, per int) map[string][]fixtureTool {
	verbs := strings.Fields("get list create update delete search read write export import sync archive send fetch run")
	nouns := strings.Fields("record report invoice order contact lead ticket asset note task document message file event metric alert dashboard user team comment")
	areas := strings.Fields("crm billing inventory hr analytics support marketing wiki monitoring forms survey payroll assets learning booking")
	out := map[string][]fixtureTool{}
	for u := range n {
		area := areas[u%len(areas)]
		name := fmt.Sprintf("%s%d", area, u)
		for i := range per {
			v, o := verbs[(u*7+i)%len(verbs)], nouns[(u*3+i*5)%len(nouns)]
			out[name] = append(out[name], fixtureTool{
				name:   fmt.Sprintf("%s_%s_%d", v, o, i),
				desc:   fmt.Sprintf("%s a %s %s in the %s system.", strings.ToUpper(v[:1])+v[1:], area, o, area),
				params: []string{o + "_id: The " + o, "limit: Most results"},
			})
		}
	}
	return out
}

// fixtureServer serves tools; a call answers "<upstream>/<tool> <arguments>".
func fixtureServer(upstream string, tools []fixtureTool, calls *atomic.Int64) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: upstream, Version: "1"}, nil)
	for _, ft := range tools {
		addFixtureTool(s, upstream, ft, calls)
	}
	return s
}

func addFixtureTool(s *mcp.Server, upstream string, ft fixtureTool, calls *atomic.Int64) {
	props := map[string]any{}
	for _, p := range ft.params {
		n, d, _ := strings.Cut(p, ": ")
		props[n] = map[string]any{"type": "string", "description": d}
	}
	s.AddTool(&mcp.Tool{Name: ft.name, Description: ft.desc, InputSchema: map[string]any{"type": "object", "properties": props}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: upstream + "/" + ft.name + " " + string(req.Params.Arguments)}}}, nil
		})
}

type searchFixture struct {
	gw      *gateway.Gateway
	base    string
	servers map[string]*mcp.Server
	calls   map[string]*atomic.Int64
	tools   int
	audit   string
}

// startSearchFixture starts the upstreams and a gateway whose /mcp route
// is in search mode, with extra YAML (auth, policy) appended.
func startSearchFixture(t *testing.T, extra string) *searchFixture {
	t.Helper()
	ups := filler(12, 76)
	for k, v := range realistic {
		ups[k] = v
	}
	f := &searchFixture{servers: map[string]*mcp.Server{}, calls: map[string]*atomic.Int64{}, audit: filepath.Join(t.TempDir(), "audit.log")}
	var yaml strings.Builder
	yaml.WriteString("listen: 127.0.0.1:0\nupstreams:\n")
	names := make([]string, 0, len(ups))
	for n := range ups {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f.calls[n] = new(atomic.Int64)
		srv := fixtureServer(n, ups[n], f.calls[n])
		f.servers[n] = srv
		f.tools += len(ups[n])
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(ts.Close)
		fmt.Fprintf(&yaml, "  %s: {url: %s}\n", n, ts.URL)
	}
	fmt.Fprintf(&yaml, "routes:\n  - path: /mcp\n    tools: {mode: search, always: [time__get_current_time]}\n  - path: /all\n")
	fmt.Fprintf(&yaml, "audit: {output: %s, include_arguments: true}\n", f.audit)
	yaml.WriteString(extra)
	f.gw, f.base = gatewaytest.StartGateway(t, yaml.String())
	return f
}

// searchResult is what search_tools answers, in structuredContent.
type searchResult struct {
	Tools []struct {
		Name        string          `json:"name"`
		Upstream    string          `json:"upstream"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
}

func search(t *testing.T, cs *mcp.ClientSession, args map[string]any) searchResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcpgw__search_tools", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("search %v: %v %+v", args, err, res)
	}
	var sr searchResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &sr); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	// The text block carries the same JSON, for clients that read text.
	var fromText searchResult
	if err := json.Unmarshal([]byte(gatewaytest.TextOf(t, res)), &fromText); err != nil || len(fromText.Tools) != len(sr.Tools) {
		t.Errorf("text block is not the structured result: %v", err)
	}
	return sr
}

func (sr searchResult) names() []string {
	var out []string
	for _, tl := range sr.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// TestToolSearchRoute: in search mode tools/list is small and fixed, the
// 20 queries find their tool in the top 5 (at least 18), and call_tool and
// direct calls reach the upstream, for every revision; the audit records
// the real tool.
func TestToolSearchRoute(t *testing.T) {
	f := startSearchFixture(t, "")
	if f.tools < 990 {
		t.Fatalf("fixture has %d tools, want about 1000", f.tools)
	}
	// tools/list: the meta-tools and the always tool, under 4 KiB.
	raw := &gatewaytest.RawClient{T: t, URL: f.base + "/mcp"}
	raw.Initialize("2025-11-25")
	m := raw.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`).Last(t)
	if m.Error != nil {
		t.Fatal(m.Error)
	}
	if len(m.Result) >= 4096 {
		t.Errorf("tools/list is %d bytes, want under 4 KiB", len(m.Result))
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(m.Result, &list)
	var listed []string
	for _, tl := range list.Tools {
		listed = append(listed, tl.Name)
	}
	if want := []string{"mcpgw__search_tools", "mcpgw__call_tool", "time__get_current_time"}; !slices.Equal(listed, want) {
		t.Errorf("tools/list = %v, want %v", listed, want)
	}
	t.Logf("tools/list: %d bytes over %d tools", len(m.Result), f.tools)

	for _, version := range []string{"2025-03-26", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			var cs *mcp.ClientSession
			if version == "2026-07-28" {
				cs = gatewaytest.Connect2026(t, f.base+"/mcp", nil)
			} else {
				cs = gatewaytest.Connect(t, f.base+"/mcp", nil, version)
			}
			ctx := context.Background()
			found := 0
			for _, q := range searchQueries {
				sr := search(t, cs, map[string]any{"query": q.query})
				got := sr.names()
				if len(got) > 5 {
					t.Errorf("%q: %d results, want the default 5", q.query, len(got))
				}
				if slices.Contains(got, q.want) {
					found++
				} else {
					t.Logf("%q: %s not in the top 5: %v", q.query, q.want, got)
				}
			}
			t.Logf("ranking: %d of %d queries have the intended tool in the top 5", found, len(searchQueries))
			if found < 18 {
				t.Errorf("ranking: %d of %d queries found their tool in the top 5, want at least 18", found, len(searchQueries))
			}
			// A result carries the full input schema; upstream and limit
			// narrow it.
			sr := search(t, cs, map[string]any{"query": "create issue", "upstream": "jira", "limit": 2})
			if len(sr.Tools) != 2 || sr.Tools[0].Name != "jira__create_issue" || !strings.Contains(string(sr.Tools[0].InputSchema), `"project_key"`) {
				t.Errorf("jira-only search: %v", sr.names())
			}
			for _, tl := range sr.Tools {
				if tl.Upstream != "jira" || !strings.HasPrefix(tl.Name, "jira__") {
					t.Errorf("jira-only search shows %s of %s", tl.Name, tl.Upstream)
				}
			}
			// call_tool and a direct call reach the same tool.
			before := f.calls["github"].Load()
			for _, call := range []*mcp.CallToolParams{
				{Name: "mcpgw__call_tool", Arguments: map[string]any{"name": "github__create_issue", "arguments": map[string]any{"title": "t"}}},
				{Name: "github__create_issue", Arguments: map[string]any{"title": "t"}},
			} {
				res, err := cs.CallTool(ctx, call)
				if err != nil || res.IsError || gatewaytest.TextOf(t, res) != `github/create_issue {"title":"t"}` {
					t.Errorf("%s: %v %+v", call.Name, err, res)
				}
			}
			if n := f.calls["github"].Load() - before; n != 2 {
				t.Errorf("github saw %d calls, want 2", n)
			}
			// Bad arguments are explained, as a tool error the model reads.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcpgw__search_tools", Arguments: map[string]any{"query": "x", "limit": 99}})
			if err != nil || !res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "limit 99 is out of range") {
				t.Errorf("limit 99: %v %+v", err, res)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcpgw__call_tool", Arguments: map[string]any{"arguments": map[string]any{}}}); err == nil || !strings.Contains(err.Error(), "arguments.name is required") {
				t.Errorf("call_tool without a name: %v", err)
			}
		})
	}

	// The other route lists every tool, as before.
	all := gatewaytest.Connect(t, f.base+"/all", nil, "2025-11-25")
	lr, err := all.ListTools(context.Background(), nil)
	if err != nil || len(lr.Tools) != f.tools {
		t.Errorf("mode all lists %d tools (%v), want %d", len(lr.Tools), err, f.tools)
	}
}

// TestToolSearchPolicy: a tool the policy hides from a principal never
// appears in its searches and cannot be called through call_tool (nor
// reaches the upstream); another principal sees and calls it; the audit
// names the real tool.
func TestToolSearchPolicy(t *testing.T) {
	f := startSearchFixture(t, `auth:
  api_keys:
    - {name: eng, key: eng-secret-0123456789, principal: alice, groups: [eng]}
    - {name: ops, key: ops-secret-0123456789, principal: bob, groups: [ops]}
policy:
  default: allow
  rules:
    - match: {groups: [ops]}
      deny: ["github__create_*", "filesystem__*"]
`)
	as := func(key, version string) *mcp.ClientSession {
		hc := &http.Client{Transport: headerTransport{"X-Api-Key": key}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "search-client", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: f.base + "/mcp", MaxRetries: -1, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	ctx := context.Background()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		eng, ops := as("eng-secret-0123456789", version), as("ops-secret-0123456789", version)
		for _, q := range []string{"create a github issue", "open a pull request", "read a file", "create or update a file in a repository"} {
			for _, tl := range search(t, ops, map[string]any{"query": q, "limit": 20}).Tools {
				if strings.HasPrefix(tl.Name, "github__create_") || strings.HasPrefix(tl.Name, "filesystem__") {
					t.Errorf("%s: ops's search %q shows the hidden %s", version, q, tl.Name)
				}
			}
		}
		if got := search(t, eng, map[string]any{"query": "create a github issue"}).names(); len(got) == 0 || got[0] != "github__create_issue" {
			t.Errorf("%s: eng's search: %v", version, got)
		}
		before := f.calls["github"].Load()
		_, err := ops.CallTool(ctx, &mcp.CallToolParams{Name: "mcpgw__call_tool", Arguments: map[string]any{"name": "github__create_issue", "arguments": map[string]any{}}})
		if err == nil || !strings.Contains(err.Error(), `unknown tool "github__create_issue"`) {
			t.Errorf("%s: ops's call_tool of a hidden tool: %v, want unknown tool", version, err)
		}
		if _, err := ops.CallTool(ctx, &mcp.CallToolParams{Name: "mcpgw__call_tool", Arguments: map[string]any{"name": "create_pull_request"}}); err == nil {
			t.Errorf("%s: ops's call_tool of a hidden tool by its bare name went through", version)
		}
		if n := f.calls["github"].Load() - before; n != 0 {
			t.Errorf("%s: github saw %d calls from denied call_tool, want 0", version, n)
		}
		res, err := eng.CallTool(ctx, &mcp.CallToolParams{Name: "mcpgw__call_tool", Arguments: map[string]any{"name": "github__create_issue", "arguments": map[string]any{"title": "x"}}})
		if err != nil || res.IsError {
			t.Errorf("%s: eng's call_tool: %v %+v", version, err, res)
		}
	}
	// The audit names the tool call_tool called, and its arguments
	// (shutdown closes the audit file: every record is in it).
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.gw.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	var saw int
	for _, r := range gatewaytest.AuditRecords(t, f.audit) {
		if r["name"] == "mcpgw__call_tool" {
			t.Errorf("audit records the meta-tool, not the real one: %v", r)
		}
		if args, _ := r["arguments"].(map[string]any); r["name"] == "github__create_issue" && r["upstream"] == "github" && principal(r) == "alice" && args["title"] == "x" {
			saw++
		}
	}
	if saw != 2 {
		t.Errorf("%d audit records of alice's github__create_issue with its arguments, want 2 (one per revision)", saw)
	}
}

// TestToolSearchListChanged: a tool an upstream adds (announced with
// list_changed) is found by the next searches; one it removes is not.
func TestToolSearchListChanged(t *testing.T) {
	f := startSearchFixture(t, "")
	cs := gatewaytest.Connect(t, f.base+"/mcp", nil, "2025-11-25")
	const q = "teleport a quantum widget"
	if got := search(t, cs, map[string]any{"query": q}).names(); slices.Contains(got, "notion__teleport_widget") {
		t.Fatalf("found before it exists: %v", got)
	}
	addFixtureTool(f.servers["notion"], "notion", fixtureTool{"teleport_widget", "Teleport a quantum widget elsewhere.", []string{"widget: Which"}}, f.calls["notion"])
	waitFor(t, func() bool {
		return slices.Contains(search(t, cs, map[string]any{"query": q}).names(), "notion__teleport_widget")
	}, "the added tool in search results")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcpgw__call_tool", Arguments: map[string]any{"name": "notion__teleport_widget"}})
	if err != nil || res.IsError {
		t.Errorf("call the added tool: %v %+v", err, res)
	}
	f.servers["notion"].RemoveTools("teleport_widget")
	waitFor(t, func() bool {
		return !slices.Contains(search(t, cs, map[string]any{"query": q}).names(), "notion__teleport_widget")
	}, "the removed tool gone from search results")
}

func principal(rec map[string]any) any {
	p, _ := rec["principal"].(map[string]any)
	return p["subject"]
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // a poll, bounded by deadline
	}
}

// headerTransport adds headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
