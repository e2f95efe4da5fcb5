package host

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// In a fleet (sessions.redis), the replica serving a session's request
// changes from request to request, but a stateful upstream's per-session
// state lives in one upstream session. The session token cannot carry it:
// the token is minted at the downstream initialize, before the session's
// first request to the upstream opens the connection. So the replica that
// initializes the upstream session records it in UpstreamSessions (Redis,
// keyed by the hashed downstream session id), and any other replica's
// connection for the session starts from that record — no second
// initialize, the same Mcp-Session-Id and MCP-Protocol-Version.
//
// Rules that keep one state per session:
//   - a shared connection never initializes again on a 404: the call fails
//     clearly (client.Options.NoReinitialize) and the next request starts
//     over, from the record if another replica made a new one meanwhile;
//   - a replica's copy ending without the client's DELETE (idle reaping,
//     shutdown) detaches: the upstream session is left to the others;
//   - two replicas initializing at once: the first record wins, the other
//     ends its own upstream session and continues the winner's.
//
// A stdio child cannot be shared: the record names the replica running it,
// and another replica refuses the session's requests with an AffinityError
// rather than start a child with none of the state.
//
// Redis down: a connection is made as on a single replica (logged, counted
// by the UpstreamSessions implementation), and the session's upstream state
// is this replica's until the record can be written.

// UpstreamSession is what a replica needs to continue a session's upstream
// session, or to know that another replica runs its stdio child.
type UpstreamSession struct {
	// ID is the upstream's Mcp-Session-Id (HTTP upstreams).
	ID string `json:"id,omitempty"`
	// Init is the upstream's initialize answer (HTTP upstreams).
	Init *mcp.InitializeResult `json:"init,omitempty"`
	// StdioReplica names the replica running the session's child (stdio).
	StdioReplica string `json:"stdio,omitempty"`
}

// UpstreamSessions records stateful upstreams' sessions for the fleet.
// Implementations bound their own time (a Redis round trip) and count
// their failures; an error means "not known", never "refuse".
type UpstreamSessions interface {
	// Load returns the record of downstream session's upstream session on
	// upstream, ok false when there is none.
	Load(ctx context.Context, session, upstream string) (rec UpstreamSession, ok bool, err error)
	// Save records rec unless a record exists that does not name
	// replacing (an upstream session id, or a stdio replica id, found
	// dead; "": none); then it returns that one and saved false.
	Save(ctx context.Context, session, upstream string, rec UpstreamSession, replacing string) (winner UpstreamSession, saved bool, err error)
	// Forget removes the record if it still names upstream session id (or
	// the stdio replica id), without waiting.
	Forget(session, upstream, id string)
	// Touch keeps the record alive while the session is used, without
	// waiting; RefreshEvery is how often a used record needs it.
	Touch(session, upstream string)
	RefreshEvery() time.Duration
}

// AffinityError refuses a request for a session whose stateful stdio
// upstream runs as a child of another replica.
type AffinityError struct {
	Upstream string
	Replica  string
}

func (e *AffinityError) Error() string {
	return fmt.Sprintf("upstream %q is stateful and runs over stdio: this session's child process (and its state) is on another gateway replica (%s), and this request reached a different one; route a session's requests to one replica (balancer affinity on Mcp-Session-Id), or start a new session", e.Upstream, e.Replica)
}

// fleetShared reports whether session key's connection of u is recorded for
// the fleet: a session (not a principal's own connection) of an HTTP or
// stdio upstream, with UpstreamSessions set.
func (u *Upstream) fleetShared(key string) bool {
	return u.host.opts.UpstreamSessions != nil && key != "" && !strings.HasPrefix(key, principalConnPrefix) &&
		u.cfg.Transport != "sse" && u.host.opts.Transport == nil
}

// connectShared makes session key's connection in a fleet: it continues the
// upstream session another replica recorded, or makes one and records it.
// dead is the id of the record whose connection just ended here: another
// replica may not have noticed yet, so it is replaced, not continued.
func (u *Upstream) connectShared(ctx context.Context, key, dead string, dial func(resume *client.Resumption) (*client.Client, error)) (*client.Client, error) {
	us := u.host.opts.UpstreamSessions
	stdio := len(u.cfg.Command) > 0
	rec, ok, err := us.Load(ctx, key, u.name)
	if err != nil {
		u.log.Warn("fleet: cannot read this session's recorded upstream session; opening a new one on this replica", zap.Error(err))
	}
	if ok && (dead == "" || (rec.ID != dead && rec.StdioReplica != dead)) {
		if c, done, err := u.adopt(key, rec, stdio, dial); done {
			return c, err
		}
	}
	c, err := dial(nil)
	if err != nil {
		return nil, err
	}
	mine := UpstreamSession{StdioReplica: u.host.opts.ReplicaID}
	if !stdio {
		id := c.SessionID()
		if id == "" || c.Modern() {
			return c, nil // stateless, or a server without sessions: nothing to continue
		}
		init := c.InitializeResult()
		mine = UpstreamSession{ID: id, Init: &init}
	}
	winner, saved, err := us.Save(ctx, key, u.name, mine, dead)
	switch {
	case err != nil:
		u.log.Warn("fleet: cannot record this session's upstream session; other replicas will open their own", zap.Error(err))
		return c, nil
	case saved || (stdio && winner.StdioReplica == mine.StdioReplica):
		u.perSession.recordLocked(key, mine)
		return c, nil
	}
	// Another replica made one at the same time: its record stands.
	_ = c.Close()
	if c, done, err := u.adopt(key, winner, stdio, dial); done {
		return c, err
	}
	return dial(nil) // the winner's could not be continued: this replica's own
}

// adopt continues rec; done false means rec is unusable here and a new
// connection should be made.
func (u *Upstream) adopt(key string, rec UpstreamSession, stdio bool, dial func(*client.Resumption) (*client.Client, error)) (*client.Client, bool, error) {
	switch {
	case stdio && rec.StdioReplica != "" && rec.StdioReplica != u.host.opts.ReplicaID:
		u.host.opts.Metrics.LimitRefused("upstreams." + u.name + ".stateful_affinity")
		return nil, true, &AffinityError{Upstream: u.name, Replica: rec.StdioReplica}
	case stdio:
		return nil, false, nil // this replica's own record (after a restart of the child)
	case rec.ID == "" || rec.Init == nil:
		return nil, false, nil
	}
	c, err := dial(&client.Resumption{SessionID: rec.ID, Init: *rec.Init})
	if err != nil {
		u.log.Warn("fleet: cannot continue this session's recorded upstream session; opening a new one", zap.Error(err))
		u.host.opts.UpstreamSessions.Forget(key, u.name, rec.ID)
		return nil, false, nil
	}
	u.perSession.recordLocked(key, rec)
	u.log.Debug("continuing an upstream session another replica opened")
	return c, true, nil
}

// touchShared refreshes key's record at most every RefreshEvery.
func (u *Upstream) touchShared(key string, now time.Time) {
	ps := &u.perSession
	if ps.touched == nil {
		ps.touched = map[string]time.Time{}
	}
	if now.Sub(ps.touched[key]) < u.host.opts.UpstreamSessions.RefreshEvery() {
		return
	}
	ps.touched[key] = now
	u.host.opts.UpstreamSessions.Touch(key, u.name)
}

// recordLocked remembers which record key's connection stands for.
func (ps *perSession) recordLocked(key string, rec UpstreamSession) {
	if ps.shared == nil {
		ps.shared = map[string]string{}
	}
	id := rec.ID
	if id == "" {
		id = rec.StdioReplica
	}
	ps.shared[key] = id
}

// forgetShared drops the record of key's connection that ended on its own
// (the upstream forgot the session, or the child exited), so the next
// request, on any replica, starts anew.
func (u *Upstream) forgetShared(key string) {
	if id := u.perSession.shared[key]; id != "" {
		u.host.opts.UpstreamSessions.Forget(key, u.name, id)
	}
}
