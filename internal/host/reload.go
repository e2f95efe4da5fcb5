package host

import (
	"errors"
	"reflect"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
)

// Config reload, the host's part. Apply diffs the new config's upstreams
// against the current set:
//
//   - unchanged (the same *config.Upstream by reflect.DeepEqual, and the same
//     host-wide separator) keep running untouched: the same *Upstream, the
//     same connections, the same children;
//   - added ones are built and started;
//   - removed and changed ones leave the set at once (new views no longer
//     route to them; a changed one's successor starts beside it) and are
//     retired: once nothing routes to them any more (the caller says so by
//     calling the returned function, after it swapped its own views), they
//     finish their in-flight calls — bounded by their timeout — and stop.
//
// The set is replaced whole behind an atomic pointer, so readers never block
// and never see half a reload.

// retireGrace lets requests that picked an old view just before the swap
// reach the upstream (and be counted) before the drain looks for quiet.
const retireGrace = 250 * time.Millisecond

// retirePoll is how often a retiring upstream is checked for quiet.
const retirePoll = 20 * time.Millisecond

// Diff is what a reload changed in the upstream set, by name (sorted).
type Diff struct {
	Added, Removed, Changed, Unchanged []string
}

// Empty reports whether no upstream changed.
func (d Diff) Empty() bool { return len(d.Added)+len(d.Removed)+len(d.Changed) == 0 }

// Touched returns the added, removed and changed names.
func (d Diff) Touched() []string {
	out := slices.Concat(d.Added, d.Removed, d.Changed)
	sort.Strings(out)
	return out
}

// ErrClosed is returned by Apply after Close.
var ErrClosed = errors.New("host: closed")

// Apply swaps in the upstreams of cfg (see above) and returns the diff and
// retire, which the caller must call once nothing it serves routes to the
// old set any more: it drains and stops the removed and replaced upstreams
// in the background (owned by the host: Close stops them at once).
func (h *Host) Apply(cfg *config.Config) (Diff, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return Diff{}, nil, ErrClosed
	}
	old := h.current()
	sep := separator(cfg)
	next := &upstreamSet{byName: map[string]*Upstream{}, sep: sep}
	var d Diff
	var gone []*Upstream
	for name, ucfg := range cfg.Upstreams {
		next.names = append(next.names, name)
		u := old.byName[name]
		switch {
		case u == nil:
			d.Added = append(d.Added, name)
		case u.sep == sep && reflect.DeepEqual(u.cfg, ucfg):
			d.Unchanged = append(d.Unchanged, name)
			next.byName[name] = u
			continue
		default:
			d.Changed = append(d.Changed, name)
			gone = append(gone, u)
		}
		next.byName[name] = h.newUpstream(name, ucfg, sep)
	}
	for _, name := range old.names {
		if _, ok := cfg.Upstreams[name]; !ok {
			d.Removed = append(d.Removed, name)
			gone = append(gone, old.byName[name])
		}
	}
	sort.Strings(next.names)
	for _, l := range [][]string{d.Added, d.Removed, d.Changed, d.Unchanged} {
		sort.Strings(l)
	}
	for _, u := range gone {
		u.retired.Store(true)
		h.retiring[u] = true
	}
	h.set.Store(next)
	if h.started {
		for _, name := range slices.Concat(d.Added, d.Changed) {
			h.startLocked(next.byName[name])
		}
	}
	retire := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.closed {
			return // Close stops them
		}
		for _, u := range gone {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				h.retire(u)
			}()
		}
	}
	return d, retire, nil
}

// retire lets a replaced or removed upstream finish its calls, then stops
// it. The wait is bounded by the upstream's timeout: no call can outlive
// it anyway.
func (h *Host) retire(u *Upstream) {
	limit := u.cfg.Timeout.D()
	if limit <= 0 {
		limit = config.DefaultTimeout
	}
	deadline := time.Now().Add(retireGrace + limit)
	quiet := func() bool { return u.inflight.Load() == 0 && u.pending() == 0 }
	wait := func(cond func() bool) {
		for !cond() && time.Now().Before(deadline) {
			select {
			case <-u.ctx.Done():
				return
			case <-time.After(retirePoll):
			}
		}
	}
	select {
	case <-u.ctx.Done():
	case <-time.After(retireGrace):
	}
	wait(quiet)
	u.stopping.Store(true) // from now on a call routed to it is refused (enter)
	wait(func() bool { return u.inflight.Load() == 0 })
	if n := u.inflight.Load() + int64(u.pending()); n > 0 {
		u.log.Warn("retired upstream still had calls after its timeout; stopping it anyway", zap.Int64("calls", n))
	}
	u.stop()
	h.mu.Lock()
	delete(h.retiring, u)
	h.mu.Unlock()
	u.log.Info("upstream stopped: removed or replaced by a config reload")
}

// stop ends the upstream's supervisor and connections and waits for them.
func (u *Upstream) stop() {
	u.cancel()
	u.closeSessions()
	u.host.mu.Lock()
	started := u.started
	u.host.mu.Unlock()
	if started {
		<-u.done
	}
	if u.ownConns != nil {
		u.ownConns.CloseIdleConnections()
	}
}

// Enter counts a call routed to the upstream; it fails once a retiring
// upstream stops taking calls. Every successful Enter is paired with Exit.
func (u *Upstream) Enter() bool {
	u.inflight.Add(1)
	if u.stopping.Load() {
		u.inflight.Add(-1)
		return false
	}
	return true
}

// Exit ends a call counted by Enter.
func (u *Upstream) Exit() { u.inflight.Add(-1) }

// pending is how many calls the upstream's connections await answers for.
func (u *Upstream) pending() int {
	n := 0
	u.mu.Lock()
	if u.client != nil {
		n += u.client.Pending()
	}
	u.mu.Unlock()
	u.altMu.Lock()
	if u.alt != nil {
		n += u.alt.Pending()
	}
	u.altMu.Unlock()
	u.perSession.mu.Lock()
	for _, c := range u.perSession.conns {
		n += c.Pending()
	}
	u.perSession.mu.Unlock()
	return n
}

// Retired reports whether a reload replaced or removed the upstream.
func (u *Upstream) Retired() bool { return u.retired.Load() }

// Stopped is closed once a started upstream's supervisor has returned.
func (u *Upstream) Stopped() <-chan struct{} { return u.done }

// InFlight is how many calls routed to the upstream have not ended.
func (u *Upstream) InFlight() int64 { return u.inflight.Load() }
