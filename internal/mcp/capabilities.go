package mcp

import "github.com/mcpgw/mcpgw/internal/rawjson"

// ServerCapability is a member of a server's capabilities object that a
// client must see before it sends certain requests (the spec's "servers
// that support X MUST declare the X capability").
type ServerCapability struct {
	// Path is the member names from the capabilities object down to the
	// capability: ["resources", "subscribe"].
	Path []string
	// What names the feature in error messages: "resource subscriptions".
	What string
}

// Name is the capability as written in error messages: "resources.subscribe".
func (c ServerCapability) Name() string {
	s := ""
	for i, k := range c.Path {
		if i > 0 {
			s += "."
		}
		s += k
	}
	return s
}

// In reports whether caps (a server's capabilities object) declares c.
func (c ServerCapability) In(caps []byte) bool {
	v, ok := rawjson.Lookup(caps, c.Path)
	// "subscribe": false declares its absence.
	return ok && string(v) != "false" && string(v) != "null"
}

// RequiredServerCapability is the capability a routed request needs of the
// server it reaches, for the methods whose capability is not implied by
// the server having listed the request's target: a listed resource may
// still not be subscribable, a listed prompt not completable. ok is false
// for every other method.
func RequiredServerCapability(method string) (c ServerCapability, ok bool) {
	if c := Method(method).Capability; c != nil {
		return *c, true
	}
	return ServerCapability{}, false
}

// serverCapabilitySince is the revision that introduced each top-level
// server capability newer than 2024-11-05: a client of an older revision
// is never offered it (it could not know what it means).
var serverCapabilitySince = map[string]Revision{
	"completions": Version20250326,
	"tasks":       Version20251125,
}

// ServerCapabilitiesFor returns caps (a server's capabilities object)
// without the members revision r does not define; caps itself when none
// need removing.
func ServerCapabilitiesFor(caps []byte, r Revision) []byte {
	out := caps
	for name, since := range serverCapabilitySince {
		if r.AtLeast(since) {
			continue
		}
		if _, ok := rawjson.Get(out, name); ok {
			if b, err := rawjson.Delete(out, name); err == nil {
				out = b
			}
		}
	}
	return out
}
