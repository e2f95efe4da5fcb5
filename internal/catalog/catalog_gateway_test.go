package catalog_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// catalogServer is an official-SDK upstream for the catalog test: n
// numbered tools, listed pageSize at a time, plus what its kind adds.
//
//   - "app": an MCP Apps server: a "show" tool whose _meta.ui.resourceUri
//     is ui://clock/app.html, the URI every app server uses;
//   - "links": a "report" tool answering with resource links, one to a
//     listed resource and one to a URI its template serves.
func catalogServer(name, kind string, n, pageSize int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "catalog-" + name, Version: "1"}, &mcp.ServerOptions{PageSize: pageSize})
	for i := range n {
		tool := fmt.Sprintf("%s%02d", name, i)
		mcp.AddTool(s, &mcp.Tool{Name: tool}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool}}}, nil, nil
		})
	}
	read := func(text, mime string) mcp.ResourceHandler {
		return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: mime, Text: text + " " + req.Params.URI}}}, nil
		}
	}
	switch kind {
	case "app":
		const ui = "ui://clock/app.html"
		mcp.AddTool(s, &mcp.Tool{Name: "show", Meta: mcp.Meta{"ui": map[string]any{"resourceUri": ui}}},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "shown"}}}, nil, nil
			})
		s.AddResource(&mcp.Resource{URI: ui, Name: "clock", MIMEType: "text/html;profile=mcp-app"}, read(name, "text/html;profile=mcp-app"))
	case "links":
		mcp.AddTool(s, &mcp.Tool{Name: "report"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ResourceLink{URI: "file:///readme.md", Name: "readme"},
				&mcp.ResourceLink{URI: "file:///reports/q3.txt", Name: "q3"},
			}}, nil, nil
		})
		s.AddResource(&mcp.Resource{URI: "file:///readme.md", Name: "readme"}, read(name, "text/plain"))
		s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///reports/{name}", Name: "report"}, read(name, "text/plain"))
	}
	return s
}

// TestCatalogThroughTheGateway: five official-SDK upstreams behind one
// prefixed route. One tools/list returns all their tools; the UI resource
// two MCP Apps servers share is shown in a form that keeps ui:// and reads
// back from each; resource links in a tool result read back; a bare tool
// name works while it is unique.
func TestCatalogThroughTheGateway(t *testing.T) {
	ups := []struct {
		name, kind  string
		n, pageSize int
	}{{"apps1", "app", 2, 0}, {"apps2", "app", 1, 0}, {"links", "links", 3, 0}, {"plain1", "", 6, 2}, {"plain2", "", 6, 4}}
	var yaml strings.Builder
	yaml.WriteString("listen: 127.0.0.1:0\nupstreams:\n")
	var want []string
	for _, u := range ups {
		srv := catalogServer(u.name, u.kind, u.n, u.pageSize)
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(ts.Close)
		fmt.Fprintf(&yaml, "  %s:\n    url: %s\n", u.name, ts.URL)
		var tools []string
		for i := range u.n {
			tools = append(tools, fmt.Sprintf("%s__%s%02d", u.name, u.name, i))
		}
		switch u.kind {
		case "app":
			tools = append(tools, u.name+"__show")
		case "links":
			tools = append(tools, u.name+"__report")
		}
		slices.Sort(tools) // the SDK lists tools by name
		want = append(want, tools...)
	}
	_, base := gatewaytest.StartGateway(t, yaml.String())
	cs := gatewaytest.Connect(t, base+"/mcp", nil, "2025-11-25")
	ctx := context.Background()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	uis := map[string]string{}
	for _, tl := range list.Tools {
		got = append(got, tl.Name)
		if ui, ok := tl.Meta["ui"].(map[string]any); ok {
			uis[tl.Name], _ = ui["resourceUri"].(string)
		}
	}
	if !slices.Equal(got, want) || list.NextCursor != "" {
		t.Fatalf("one tools/list:\n got %v (nextCursor %q)\nwant %v (no cursor)", got, list.NextCursor, want)
	}

	// The shared UI resource: two names, both ui://, each reading its own.
	for _, app := range []string{"apps1", "apps2"} {
		uri := uis[app+"__show"]
		if uri != "ui://clock/app.html?mcpgw="+app {
			t.Errorf("%s__show's UI resource is %q", app, uri)
			continue
		}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		if c := res.Contents[0]; c.URI != uri || c.MIMEType != "text/html;profile=mcp-app" || c.Text != app+" ui://clock/app.html" {
			t.Errorf("read %s: %+v", uri, c)
		}
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ui://clock/app.html"}); err == nil ||
		!strings.Contains(err.Error(), "ui://clock/app.html?mcpgw=apps1 or ui://clock/app.html?mcpgw=apps2") {
		t.Errorf("the shared URI as the servers wrote it: %v, want an error naming both", err)
	}

	// Resource links a tool hands out read back, by their upstream's own
	// URIs (unique on the route), called by the tool's bare name.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "report"})
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			links = append(links, l.URI)
		}
	}
	if want := []string{"file:///readme.md", "file:///reports/q3.txt"}; !slices.Equal(links, want) {
		t.Errorf("resource links %v, want %v", links, want)
	}
	for _, uri := range links {
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || rr.Contents[0].Text != "links "+uri {
			t.Errorf("read %s: %+v %v", uri, rr, err)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "show"}); err == nil || !strings.Contains(err.Error(), "apps1__show or apps2__show") {
		t.Errorf("the bare name two upstreams share: %v, want an error naming both", err)
	}
}

// TestPolicyJudgesTheResolvedName: a bare name is judged as the prefixed
// name it resolves to, and a candidate the policy hides neither makes a
// bare name ambiguous nor shows in an answer.
func TestPolicyJudgesTheResolvedName(t *testing.T) {
	var ups strings.Builder
	for _, u := range []struct{ name, kind string }{{"apps1", "app"}, {"apps2", "app"}, {"links", "links"}} {
		srv := catalogServer(u.name, u.kind, 1, 0)
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(ts.Close)
		fmt.Fprintf(&ups, "  %s:\n    url: %s\n", u.name, ts.URL)
	}
	type call struct{ name, want string } // want "": the call succeeds
	for _, tc := range []struct {
		name, policy string
		calls        []call
	}{
		{"deny by prefixed name", `{default: allow, rules: [{deny: ["links__report", "apps2__show"]}]}`, []call{
			{"report", `unknown tool "report"`}, // its one candidate is hidden: as if it did not exist
			{"links__report", `unknown tool "links__report"`},
			{"show", ""}, // apps2__show is hidden: only apps1__show is seen
			{"apps1__show", ""},
		}},
		{"allow by prefixed name", `{default: deny, rules: [{allow: ["apps1__*", "links__*"]}]}`, []call{
			{"show", ""},   // judged as apps1__show, which is allowed
			{"report", ""}, // judged as links__report
			{"apps2__show", `unknown tool "apps2__show"`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base := gatewaytest.StartGateway(t, "listen: 127.0.0.1:0\nupstreams:\n"+ups.String()+"policy: "+tc.policy+"\n")
			cs := gatewaytest.Connect(t, base+"/mcp", nil, "2025-11-25")
			for _, c := range tc.calls {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.name})
				switch {
				case c.want == "" && (err != nil || res.IsError):
					t.Errorf("%s: %v %+v", c.name, err, res)
				case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
					t.Errorf("%s: %v, want an error saying %s", c.name, err, c.want)
				}
				if err != nil && strings.Contains(err.Error(), "apps2__show") && c.name != "apps2__show" {
					t.Errorf("%s: the answer names the hidden apps2__show: %v", c.name, err)
				}
			}
		})
	}
}
