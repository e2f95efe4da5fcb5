package host

import "time"

// SetSessionClock makes u's per-session bookkeeping read the time from now.
func SetSessionClock(u *Upstream, now func() time.Time) {
	u.perSession.mu.Lock()
	u.perSession.now = now
	u.perSession.mu.Unlock()
}
