package catalog

import (
	"context"
	"strings"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// The skills extension (SEP-2640) on a route. skills/list is merged and
// paged like the other lists; skills/get and resources/directory/read are
// routed by their URI like resources/read, and policy judges them as
// resources. A skill entry names its SKILL.md and every file of the skill
// by URI: the index holds all of them, and the skill's directories, so
// that a read of any of them finds the upstream that listed it, and a URI
// two upstreams share is shown in its explicit form (naming.go). Only
// URIs are renamed: a file's bytes, and so the digest and size its entry
// carries, are the upstream's.

// skillsCapability is where a server declares the extension.
var skillsCapability = mcp.ServerCapability{Path: []string{"extensions", mcp.ExtensionSkills}, What: "skills"}

// skillManifest is the name of a skill's root file.
const skillManifest = "/SKILL.md"

// appendSkillIDs appends what a skills/list entry lets a client read: the
// SKILL.md URI, the URI of each file in its resources, and the directory
// URIs from the skill's root down to each file (what
// resources/directory/read takes).
func appendSkillIDs(ids []string, entry []byte) []string {
	uri, ok := rawjson.GetString(entry, "uri")
	if !ok {
		return ids
	}
	ids = append(ids, uri)
	root, isSkill := strings.CutSuffix(uri, skillManifest)
	if isSkill {
		ids = append(ids, root)
	}
	arr, ok := rawjson.Get(entry, "resources")
	if !ok || len(arr) == 0 || arr[0] != '[' {
		return ids // "dynamic": no manifest of files
	}
	files, err := rawjson.Elements(arr)
	if err != nil {
		return ids
	}
	for _, f := range files {
		fu, ok := rawjson.GetString(f, "uri")
		if !ok || fu == uri {
			continue
		}
		ids = append(ids, fu)
		if !isSkill || !strings.HasPrefix(fu, root+"/") {
			continue
		}
		// The subdirectories between the root and the file.
		rel := fu[len(root)+1:]
		for i := strings.IndexByte(rel, '/'); i >= 0; {
			ids = append(ids, root+"/"+rel[:i])
			j := strings.IndexByte(rel[i+1:], '/')
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	return ids
}

// skillOffer reads the skills extension of one upstream's capabilities:
// whether it declares it, and with directoryRead.
func skillOffer(caps []byte) (skills, directoryRead bool) {
	if !skillsCapability.In(caps) {
		return false, false
	}
	dr := mcp.ServerCapability{Path: []string{"extensions", mcp.ExtensionSkills, mcp.SkillsDirectoryRead}}
	return true, dr.In(caps)
}

// withSkills adds the skills extension to the route's capabilities
// object when an upstream declares it, with directoryRead when one does
// (a directory read of another upstream's skill is refused by name:
// capabilityGap).
func withSkills(out []byte, skills, directoryRead bool) []byte {
	if !skills {
		return out
	}
	setting := `{}`
	if directoryRead {
		setting = `{"` + mcp.SkillsDirectoryRead + `":true}`
	}
	exts, ok := rawjson.Get(out, "extensions")
	if !ok {
		exts = []byte(`{}`)
	}
	exts, err := rawjson.Set(exts, mcp.ExtensionSkills, []byte(setting))
	if err != nil {
		return out
	}
	if o, err := rawjson.Set(out, "extensions", exts); err == nil {
		return o
	}
	return out
}

// rewriteSkill names a skill entry's URIs for the route: its uri and the
// uri of each file in its resources. Nothing else of the entry changes.
func (v *View) rewriteSkill(ctx context.Context, upstream string, entry []byte) ([]byte, bool, error) {
	out, changed, err := v.renamePath(ctx, upstream, entry, []string{"uri"})
	if err != nil {
		return entry, false, err
	}
	out, c, err := editArray(out, "resources", func(f []byte) ([]byte, bool, error) {
		return v.renamePath(ctx, upstream, f, []string{"uri"})
	})
	if err != nil {
		return entry, false, err
	}
	return out, changed || c, nil
}
