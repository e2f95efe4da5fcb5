package gatewaytest

import (
	"context"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// The revision matrix's upstream and a one-line rendering of an answer,
// shared by the Streamable HTTP tests (internal/router/streamable) and the
// gateway's bridge benchmark and replica tests.

// MatrixServer is the upstream of the matrix. Its tools ask for input the
// 2026-07-28 way (an input_required result); on a legacy session the SDK
// turns that into server→client requests itself, so one server serves both
// columns with each revision's own wire.
func MatrixServer(modern bool) *mcp.Server {
	var versions []string
	if !modern {
		versions = FidLegacyVersions()
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "matrix", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			v := req.Params.Argument.Value
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{v + "1", v + "2"}, Total: 2}}, nil
		},
	})
	type whoIn struct {
		Who string `json:"who"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "greet"}, func(_ context.Context, _ *mcp.CallToolRequest, in whoIn) (*mcp.CallToolResult, any, error) {
		return FidResult("hello %s", in.Who), nil, nil
	})
	// caps reports the client capabilities the request came with (its
	// _meta's, or its session's initialize).
	mcp.AddTool(srv, &mcp.Tool{Name: "caps"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c := req.ClientCapabilities()
		if c == nil {
			c = &mcp.ClientCapabilities{}
		}
		return FidResult("sampling=%v elicitation=%v", c.Sampling != nil, c.Elicitation != nil), nil, nil
	})
	// log sends one message at each of debug, info and error, then answers.
	mcp.AddTool(srv, &mcp.Tool{Name: "log"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for _, level := range []mcp.LoggingLevel{"debug", "info", "error"} {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "matrix", Data: string(level) + " message"})
		}
		return FidResult("logged"), nil, nil
	})
	type askIn struct {
		Kind string `json:"kind"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(_ context.Context, req *mcp.CallToolRequest, in askIn) (*mcp.CallToolResult, any, error) {
		switch r := req.Params.InputResponses["q"].(type) {
		case *mcp.CreateMessageWithToolsResult:
			var text string
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text += tc.Text
				}
			}
			return FidResult("sampled %s", text), nil, nil
		case *mcp.ElicitResult:
			return FidResult("elicited %s %v", r.Action, r.Content["name"]), nil, nil
		case *mcp.ListRootsResult:
			var uris []string
			for _, root := range r.Roots {
				uris = append(uris, root.URI)
			}
			return FidResult("roots %s", strings.Join(uris, ",")), nil, nil
		}
		var q mcp.InputRequest
		switch in.Kind {
		case "sampling":
			q = &mcp.CreateMessageParams{MaxTokens: 8, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "2+2?"}}}}
		case "elicitation":
			q = &mcp.ElicitParams{Message: "name?", RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}}, Required: []string{"name"},
			}}
		case "roots":
			q = &mcp.ListRootsParams{}
		default:
			return FidErrorResult("unknown kind %q", in.Kind), nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": q}}, nil, nil
	})
	type touchIn struct {
		URI string `json:"uri"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "touch"}, func(ctx context.Context, _ *mcp.CallToolRequest, in touchIn) (*mcp.CallToolResult, any, error) {
		if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI}); err != nil {
			return FidErrorResult("%v", err), nil, nil
		}
		return FidResult("touched"), nil, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "welcome", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "welcome " + req.Params.Arguments["who"]}}}}, nil
		})
	srv.AddResource(&mcp.Resource{URI: "mem://doc", Name: "doc"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "the doc"}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://items/{id}", Name: "item"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item " + strings.TrimPrefix(req.Params.URI, "mem://items/")}}}, nil
		})
	return srv
}

// Describe renders an answer (or its absence) as its wire JSON, for test
// failure messages.
func Describe(m *jsonrpc.Message) string {
	if m == nil {
		return "none"
	}
	b, _ := jsonrpc.Encode(m)
	return string(b)
}
