// Package demo is the small MCP server behind `mcpgw demo-server`: the
// upstream of the embedded default config, so that a fresh `mcpgw run` has
// something to serve with nothing else installed. It is built with the
// official Go SDK and is never on the gateway's request path.
package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server returns the demo MCP server.
func Server(version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpgw-demo", Title: "mcpgw demo server", Version: version},
		&mcp.ServerOptions{Instructions: "A demo upstream built into mcpgw: echo text, add numbers, read a short readme."})

	type echoIn struct {
		Text string `json:"text" jsonschema:"the text to echo back"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the given text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})

	type addIn struct {
		A float64 `json:"a" jsonschema:"first addend"`
		B float64 `json:"b" jsonschema:"second addend"`
	}
	type addOut struct {
		Sum float64 `json:"sum"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})

	type sleepIn struct {
		Milliseconds int `json:"ms" jsonschema:"how long to sleep, at most 60000"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep, reporting progress every 100ms; useful to try timeouts and cancellation."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			d := time.Duration(min(max(in.Milliseconds, 0), 60000)) * time.Millisecond
			deadline := time.Now().Add(d)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-tick.C:
					if tok := req.Params.GetProgressToken(); tok != nil {
						done := min(d-time.Until(deadline), d)
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
							ProgressToken: tok, Progress: float64(done.Milliseconds()), Total: float64(d.Milliseconds()),
						})
					}
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("slept %s", d)}}}, nil, nil
		})

	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "A greeting.", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			name := strings.TrimSpace(req.Params.Arguments["name"])
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + name + "."}}}}, nil
		})

	const readme = "mcpgw is a Model Context Protocol gateway. This resource comes from its built-in demo upstream."
	s.AddResource(&mcp.Resource{URI: "demo://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: readme}}}, nil
		})
	return s
}

// ServeStdio runs the demo server on stdin/stdout until the client goes away.
func ServeStdio(ctx context.Context, version string) error {
	return Server(version).Run(ctx, &mcp.StdioTransport{})
}
