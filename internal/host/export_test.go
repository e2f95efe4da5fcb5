package host

import (
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
)

// SetSessionClock makes u's per-session bookkeeping read the time from now.
func SetSessionClock(u *Upstream, now func() time.Time) {
	u.perSession.mu.Lock()
	u.perSession.now = now
	u.perSession.mu.Unlock()
}

// InteractiveWaiting is how many calls wait for a pool connection.
func InteractiveWaiting(u *Upstream) int {
	u.interactive.mu.Lock()
	defer u.interactive.mu.Unlock()
	return u.interactive.waiting
}

// InteractiveTurnWaiting is how many calls wait for their turn on c.
func InteractiveTurnWaiting(u *Upstream, c *client.Client) int {
	u.interactive.mu.Lock()
	defer u.interactive.mu.Unlock()
	if g := u.interactive.gates[c]; g != nil {
		return g.waiting
	}
	return 0
}

// SetInteractiveClock makes u's interactive pool read the time from now.
func SetInteractiveClock(u *Upstream, now func() time.Time) {
	u.interactive.mu.Lock()
	u.interactive.now = now
	u.interactive.mu.Unlock()
}

// ReapInteractive runs the pool's idle reaping now (its timer's work).
func ReapInteractive(u *Upstream) { u.reapInteractive() }
