package core

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// skillsServer declares the skills extension and lists two skills, with
// skills/get; their files are not in resources/list.
func skillsServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "up", Version: "1"}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{
			Resources:  &sdk.ResourceCapabilities{},
			Extensions: map[string]any{mcp.ExtensionSkills: map[string]any{}},
		},
	})
	entry := func(name string) skillEntryJSON {
		u := "skill://" + name + "/SKILL.md"
		return skillEntryJSON{URI: u, Frontmatter: map[string]string{"name": name, "description": "d"},
			Resources: []map[string]any{{"uri": u, "digest": "sha256:" + strings.Repeat("0", 64), "size": 0}}}
	}
	if err := sdk.AddReceivingCustomMethod(s, mcp.MethodSkillsList, func(context.Context, *sdk.ServerSession, *skillsParams) (*skillsListJSON, error) {
		return &skillsListJSON{Skills: []skillEntryJSON{entry("open"), entry("secret")}}, nil
	}); err != nil {
		panic(err)
	}
	if err := sdk.AddReceivingCustomMethod(s, mcp.MethodSkillsGet, func(_ context.Context, _ *sdk.ServerSession, p *skillsParams) (*skillGetJSON, error) {
		name := strings.TrimSuffix(strings.TrimPrefix(p.URI, "skill://"), "/SKILL.md")
		if name != "open" && name != "secret" {
			return nil, &sdkjsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "no skill " + p.URI} // as a pre-2026 server may say
		}
		return &skillGetJSON{Skill: entry(name)}, nil
	}); err != nil {
		panic(err)
	}
	return s
}

type skillsParams struct {
	sdk.ParamsBase
	URI    string `json:"uri,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

type skillEntryJSON struct {
	URI         string            `json:"uri"`
	Frontmatter map[string]string `json:"frontmatter"`
	Resources   []map[string]any  `json:"resources"`
}

type skillsListJSON struct {
	sdk.ResultBase
	Skills []skillEntryJSON `json:"skills"`
}

type skillGetJSON struct {
	sdk.ResultBase
	Skill skillEntryJSON `json:"skill"`
}

// skills/list is a merged list and skills/get a routed request: both
// answered through the route, and policy judges a skill as the resource
// its SKILL.md URI names (hidden from the list, refused by skills/get).
func TestSkillsRouted(t *testing.T) {
	f := newFixtureWith(t, skillsServer(), false)
	pol, err := policy.Compile(&config.Policy{Default: config.PolicyAllow, Rules: []*config.PolicyRule{{Deny: []string{"resource:up+skill://secret/*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	f.gen.Policy = pol
	ctx := context.Background()

	resp := f.core.Handle(ctx, f.session(`{}`), request(mcp.MethodSkillsList, `{}`), nil, nil)
	if resp.Error != nil {
		t.Fatalf("skills/list: %v", resp.Error)
	}
	var list struct {
		Skills []struct{ URI string } `json:"skills"`
	}
	if err := json.Unmarshal(resp.Result, &list); err != nil || len(list.Skills) != 1 || list.Skills[0].URI != "skill://open/SKILL.md" {
		t.Errorf("skills/list = %s, want the open skill alone", resp.Result)
	}

	resp = f.core.Handle(ctx, f.session(`{}`), request(mcp.MethodSkillsGet, `{"uri":"skill://open/SKILL.md"}`), nil, nil)
	if resp.Error != nil || !strings.Contains(string(resp.Result), `"uri":"skill://open/SKILL.md"`) {
		t.Errorf("skills/get open: %v %s", resp.Error, resp.Result)
	}
	resp = f.core.Handle(ctx, f.session(`{}`), request(mcp.MethodSkillsGet, `{"uri":"skill://secret/SKILL.md"}`), nil, nil)
	if resp.Error == nil || resp.Error.Code != -32602 {
		// SEP-2640: -32602 for a URI that is not a skill served (here:
		// not one the caller may see), on a session revision too.
		t.Errorf("skills/get of a denied skill answered %v %s, want -32602", resp.Error, resp.Result)
	}
	resp = f.core.Handle(ctx, f.session(`{}`), request(mcp.MethodSkillsGet, `{"uri":"skill://nowhere/SKILL.md"}`), nil, nil)
	if resp.Error == nil || resp.Error.Code != -32602 {
		t.Errorf("skills/get of an unknown skill answered %v %s, want -32602", resp.Error, resp.Result)
	}
}
