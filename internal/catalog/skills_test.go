package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// skillUpstream is a fake upstream serving skills (name → relative path →
// content; each has a SKILL.md): skills/list entries with their digests,
// skills/get, resources/read of every file (none is in resources/list)
// and resources/directory/read.
func skillUpstream(skills map[string]map[string]string) *fakeUpstream {
	files := map[string]string{}
	entries := map[string]string{}
	var names []string
	for name, fs := range skills {
		names = append(names, name)
		root := "skill://" + name
		var paths []string
		for p := range fs {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		var res []string
		for _, p := range paths {
			u := root + "/" + p
			files[u] = fs[p]
			sum := sha256.Sum256([]byte(fs[p]))
			res = append(res, fmt.Sprintf(`{"uri":%q,"digest":"sha256:%s","size":%d}`, u, hex.EncodeToString(sum[:]), len(fs[p])))
		}
		entries[root+"/SKILL.md"] = fmt.Sprintf(`{"uri":%q, "frontmatter":{"name":%q,"description":"d"},"resources":[%s],"_meta":{"k":"v"}}`,
			root+"/SKILL.md", name, strings.Join(res, ","))
	}
	sort.Strings(names)
	f := &fakeUpstream{}
	for _, n := range names {
		f.skills = append(f.skills, entries["skill://"+n+"/SKILL.md"])
	}
	f.handle = func(method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		uri, _ := rawjson.GetString(params, "uri")
		switch method {
		case mcp.MethodResourcesRead:
			c, ok := files[uri]
			if !ok {
				return nil, jsonrpc.Errorf(mcp.CodeResourceNotFound, "no %s", uri)
			}
			b, _ := json.Marshal(map[string]any{"contents": []map[string]string{{"uri": uri, "mimeType": "text/markdown", "text": c}}})
			return b, nil
		case mcp.MethodSkillsGet:
			e, ok := entries[uri]
			if !ok {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no skill %s", uri)
			}
			return json.RawMessage(`{"skill":` + e + `}`), nil
		case mcp.MethodResourcesDirectoryRead:
			var kids []string
			seen := map[string]bool{}
			for u := range files {
				rel, ok := strings.CutPrefix(u, uri+"/")
				if !ok {
					continue
				}
				name, _, deeper := strings.Cut(rel, "/")
				if seen[name] {
					continue
				}
				seen[name] = true
				mime := "text/markdown"
				if deeper {
					mime = "inode/directory"
				}
				kids = append(kids, fmt.Sprintf(`{"uri":%q,"name":%q,"mimeType":%q}`, uri+"/"+name, name, mime))
			}
			if len(kids) == 0 {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s is not a directory", uri)
			}
			sort.Strings(kids)
			return json.RawMessage(`{"resources":[` + strings.Join(kids, ",") + `]}`), nil
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no %s here", method)
	}
	return f
}

// A route merging two skills upstreams offers the extension, lists both
// upstreams' skills across pages, and every URI a listed entry names —
// the skill, each file, the skill's directories — reaches the upstream
// that listed it; the bytes read match the entry's digest and size. A
// skill URI both upstreams serve is shown in its explicit form.
func TestSkillsMergedRoute(t *testing.T) {
	a := skillUpstream(map[string]map[string]string{
		"pdf-processing": {"SKILL.md": "---\nname: pdf-processing\ndescription: d\n---\nA\n", "references/FORMS.md": "forms of a\n"},
		"shared":         {"SKILL.md": "---\nname: shared\ndescription: d\n---\nshared by a\n"},
	})
	b := skillUpstream(map[string]map[string]string{
		"git-workflow": {"SKILL.md": "---\nname: git-workflow\ndescription: d\n---\nB\n", "scripts/x/run.sh": "echo b\n"},
		"shared":       {"SKILL.md": "---\nname: shared\ndescription: d\n---\nshared by b, longer\n"},
	})
	h := fakeHost(t, map[string]*fakeUpstream{"a": a, "b": b})
	v := newView(h, nil, true, 1, true) // one skill a page: the merge pages
	ctx := context.Background()

	if ext, ok := rawjson.Lookup(v.Capabilities(nil), []string{"extensions", mcp.ExtensionSkills}); !ok || string(ext) != `{"directoryRead":true}` {
		t.Errorf("capabilities %s: want the skills extension with directoryRead", v.Capabilities(nil))
	}

	var entries [][]byte
	params := json.RawMessage(`{}`)
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("skills/list does not end")
		}
		res, jerr := v.List(ctx, Skills, params)
		if jerr != nil {
			t.Fatalf("skills/list: %v", jerr)
		}
		arr, _ := rawjson.Get(res, "skills")
		items, err := rawjson.Elements(arr)
		if err != nil {
			t.Fatalf("skills/list result %s: %v", res, err)
		}
		entries = append(entries, items...)
		next, ok := rawjson.GetString(res, "nextCursor")
		if !ok {
			break
		}
		params, _ = json.Marshal(map[string]string{"cursor": next})
	}
	var uris []string
	for _, e := range entries {
		u, _ := rawjson.GetString(e, "uri")
		uris = append(uris, u)
		if !strings.Contains(string(e), `"_meta":{"k":"v"}`) || !strings.Contains(string(e), `"frontmatter":{"name":`) {
			t.Errorf("entry %s lost members", e)
		}
	}
	want := []string{"skill://pdf-processing/SKILL.md", "skill://shared/SKILL.md?mcpgw=a", "skill://git-workflow/SKILL.md", "skill://shared/SKILL.md?mcpgw=b"}
	if !slices.Equal(uris, want) {
		t.Fatalf("listed skills %q, want %q", uris, want)
	}

	owner := map[string]*fakeUpstream{"a": a, "b": b}
	for _, e := range entries {
		skillURI, _ := rawjson.GetString(e, "uri")
		up := "a"
		if strings.Contains(skillURI, "git-workflow") || strings.HasSuffix(skillURI, "=b") {
			up = "b"
		}
		arr, _ := rawjson.Get(e, "resources")
		files, _ := rawjson.Elements(arr)
		for _, f := range files {
			var fe struct {
				URI    string `json:"uri"`
				Digest string `json:"digest"`
				Size   int    `json:"size"`
			}
			if err := json.Unmarshal(f, &fe); err != nil {
				t.Fatal(err)
			}
			before := len(owner[up].requests())
			p, _ := json.Marshal(map[string]string{"uri": fe.URI})
			resp, jerr := v.Forward(ctx, mcp.MethodResourcesRead, p, client.CallOptions{})
			if jerr != nil || resp.Error != nil {
				t.Fatalf("resources/read %s: %v %v", fe.URI, jerr, resp)
			}
			if got := len(owner[up].requests()); got != before+1 {
				t.Errorf("resources/read %s did not reach upstream %s", fe.URI, up)
			}
			var rr struct {
				Contents []struct{ URI, Text string }
			}
			_ = json.Unmarshal(resp.Result, &rr)
			if len(rr.Contents) != 1 {
				t.Fatalf("resources/read %s: %s", fe.URI, resp.Result)
			}
			sum := sha256.Sum256([]byte(rr.Contents[0].Text))
			if d := "sha256:" + hex.EncodeToString(sum[:]); d != fe.Digest || len(rr.Contents[0].Text) != fe.Size {
				t.Errorf("%s: read %d bytes %s; listed %d bytes %s", fe.URI, len(rr.Contents[0].Text), d, fe.Size, fe.Digest)
			}
			if rr.Contents[0].URI != fe.URI {
				t.Errorf("read of %s names its content %s", fe.URI, rr.Contents[0].URI)
			}
		}
		p, _ := json.Marshal(map[string]string{"uri": skillURI})
		resp, jerr := v.Forward(ctx, mcp.MethodSkillsGet, p, client.CallOptions{})
		if jerr != nil || resp.Error != nil {
			t.Fatalf("skills/get %s: %v %v", skillURI, jerr, resp)
		}
		if got, _ := rawjson.GetPath(resp.Result, []string{"skill", "uri"}); got != skillURI {
			t.Errorf("skills/get %s answers skill.uri %s", skillURI, got)
		}
		if got, _ := rawjson.Get(resp.Result, "skill"); string(got) != string(e) {
			t.Errorf("skills/get %s:\n%s\nwant the listed entry\n%s", skillURI, got, e)
		}
	}

	// Directories: the skill root and a subdirectory of each upstream.
	for _, tc := range []struct{ dir, up, child string }{
		{"skill://pdf-processing", "a", `"uri":"skill://pdf-processing/references","name":"references","mimeType":"inode/directory"`},
		{"skill://git-workflow/scripts", "b", `"uri":"skill://git-workflow/scripts/x"`},
	} {
		p, _ := json.Marshal(map[string]string{"uri": tc.dir})
		resp, jerr := v.Forward(ctx, mcp.MethodResourcesDirectoryRead, p, client.CallOptions{})
		if jerr != nil || resp.Error != nil {
			t.Fatalf("resources/directory/read %s: %v %v", tc.dir, jerr, resp)
		}
		if !strings.Contains(string(resp.Result), tc.child) {
			t.Errorf("resources/directory/read %s = %s, want a child %s", tc.dir, resp.Result, tc.child)
		}
	}
}
