package client

import (
	"encoding/json"
	"strconv"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// clientToken is the progress token a call of id carries upstream: one
// unique to this client, so that two callers using the same token value
// never see each other's progress.
func clientToken(id jsonrpc.ID) json.RawMessage {
	return json.RawMessage(strconv.Quote("mcpgw-" + id.String()))
}

// viewMeta gives params (a request to an upstream that negotiated a
// session revision) the _meta of this hop from what the edge read of it
// (v, of the params before their target was renamed, which left _meta as
// it was): without the caller's per-hop keys (mcp.WithoutHopMeta), and
// with the caller's progress token replaced by this client's (tok; nil
// when there is none). The new _meta is made from v's spans and set with
// one edit of params; params that need neither come back as they are.
func viewMeta(params json.RawMessage, v *mcp.ForwardView, id jsonrpc.ID) (out, tok json.RawMessage, err error) {
	if v.ProgressToken != nil {
		tok = clientToken(id)
	}
	if v.Meta == nil || (tok == nil && !v.HopKeys) {
		return params, tok, nil
	}
	meta, ms := v.Meta, v.MetaMembers
	// The cuts rawjson.Delete makes, one hop key after the other: from the
	// end of the last member kept to the end of the key's value, or, with
	// none kept before it, from after the '{' to the next member's key.
	var cuts []span
	lastKept, kept := -1, 0
	for i, m := range ms {
		if !mcp.IsHopKey(m.Key) {
			lastKept = m.End
			kept++
			continue
		}
		c := span{lastKept, m.End}
		if lastKept < 0 {
			c.from = 1 // meta[0] is its '{' (rawjson.Scan)
			if i+1 < len(ms) {
				c.to = ms[i+1].KeyStart
			}
		}
		if n := len(cuts); n > 0 && c.from <= cuts[n-1].to {
			cuts[n-1].to = max(cuts[n-1].to, c.to)
			continue
		}
		cuts = append(cuts, c)
	}
	if kept == 0 {
		out, err = rawjson.Delete(params, "_meta")
		return out, tok, err
	}
	buf := make([]byte, 0, len(meta)+len(tok))
	at := 0
	for _, m := range ms {
		if m.Key == "progressToken" && tok != nil {
			buf = appendCut(buf, meta, at, m.Start, cuts)
			buf = append(buf, tok...)
			at = m.End
		}
	}
	buf = appendCut(buf, meta, at, len(meta), cuts)
	out, err = rawjson.Set(params, "_meta", buf)
	return out, tok, err
}

// span is a cut of meta's text, [from, to).
type span struct{ from, to int }

// appendCut appends meta[from:to] less the cuts in it.
func appendCut(buf, meta []byte, from, to int, cuts []span) []byte {
	for _, c := range cuts {
		cf, ct := max(c.from, from), min(c.to, to)
		if cf >= ct {
			continue
		}
		buf = append(buf, meta[from:cf]...)
		from = ct
	}
	return append(buf, meta[from:to]...)
}
