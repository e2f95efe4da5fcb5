package core

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// URL-mode elicitations the gateway handed out (-32042 for per-user
// upstream authorization) remember the session they were sent to, so
// that when the user finishes (the callback page stored their tokens) the
// session is told with notifications/elicitation/complete. Best effort:
// a session that is gone, or on another replica, is told nothing (its
// client retries anyway). Bounded: the oldest are forgotten first, and an
// entry lives no longer than a start link does.

const (
	maxElicitations = 10000
	elicitationTTL  = time.Hour // the longest link_lifetime config accepts
)

type elicitation struct {
	session string
	at      time.Time
}

type elicitations struct {
	mu    sync.Mutex
	byID  map[string]elicitation
	order []string // oldest first
}

// elicit answers a request whose upstream needs the caller's own
// authorization first (catalog's -32042 for a
// credentials.AuthorizationRequiredError): a caller that declared
// capabilities.elicitation.url gets the URLElicitationRequiredError as is
// (and its session is told when the user is done); an older caller gets,
// for tools/call, a tool result with isError whose text carries the link
// (so the model can show it), and for other methods an error whose
// message does.
func (c *Core) elicit(sess *Session, msg *jsonrpc.Message, e *jsonrpc.Error) *jsonrpc.Message {
	if _, ok := rawjson.Lookup(sess.caps, []string{"elicitation", "url"}); ok {
		c.noteElicitation(sess, e)
		return jsonrpc.NewError(msg.ID, e)
	}
	if msg.Method == mcp.MethodToolsCall {
		res, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": e.Message}}, "isError": true})
		return sessionResult(sess, jsonrpc.NewResult(msg.ID, res))
	}
	return jsonrpc.NewError(msg.ID, &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: e.Message})
}

// noteElicitation remembers the elicitation ids a -32042 error for sess
// carries.
func (c *Core) noteElicitation(sess *Session, e *jsonrpc.Error) {
	if e == nil || e.Code != mcp.CodeURLElicitationRequired || sess == nil || sess.id == "" {
		return
	}
	var d struct {
		Elicitations []struct {
			ID string `json:"elicitationId"`
		} `json:"elicitations"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return
	}
	el := &c.elicits
	el.mu.Lock()
	defer el.mu.Unlock()
	if el.byID == nil {
		el.byID = map[string]elicitation{}
	}
	now := time.Now()
	for _, x := range d.Elicitations {
		if x.ID == "" {
			continue
		}
		for len(el.order) > 0 && (len(el.byID) >= maxElicitations || now.Sub(el.byID[el.order[0]].at) > elicitationTTL) {
			delete(el.byID, el.order[0])
			el.order = el.order[1:]
		}
		if _, dup := el.byID[x.ID]; !dup {
			el.order = append(el.order, x.ID)
		}
		el.byID[x.ID] = elicitation{session: sess.id, at: now}
	}
}

// ElicitationComplete tells the session a URL-mode elicitation was sent
// to that the user finished it (notifications/elicitation/complete), and
// reports whether a session was told.
func (c *Core) ElicitationComplete(id string) bool {
	el := &c.elicits
	el.mu.Lock()
	x, ok := el.byID[id]
	delete(el.byID, id) // order keeps the id until it ages out; harmless
	el.mu.Unlock()
	if !ok || time.Since(x.at) > elicitationTTL {
		return false
	}
	s := c.opts.Sessions.Lookup(x.session)
	if s == nil {
		return false
	}
	params, _ := json.Marshal(map[string]string{"elicitationId": id})
	b, err := jsonrpc.Encode(jsonrpc.NewNotification(mcp.NotificationElicitationDone, params))
	return err == nil && s.Send(b)
}
