package host

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Starting up: a list does not wait long for an upstream still making its
// first connection (one hung child must not hold every client's first
// tools/list for its whole startup_timeout); it is answered with what is
// ready, and the upstream's arrival reaches sessions as list_changed
// through the usual state-change path (Options.OnStateChange, which the
// gateway turns into the router's list_changed fan-out, for the lists of
// ListChanges).

// setting is the config path of one of the upstream's keys, as error
// messages name it.
func (u *Upstream) setting(key string) string {
	return "upstreams." + u.name + "." + key
}

// awaitStartForList waits for an upstream making its first connection
// until startup_list_wait after that began; past it the upstream is
// unavailable to lists (calls still wait for it, Client).
func (u *Upstream) awaitStartForList(ctx context.Context) error {
	u.mu.Lock()
	starting := u.state == StateStarting
	u.mu.Unlock()
	if !starting {
		return nil
	}
	bound := u.cfg.StartupListWait.D()
	left := bound - time.Since(time.Unix(0, u.startedAt.Load()))
	if left > 0 {
		t := time.NewTimer(left)
		defer t.Stop()
		select {
		case <-u.first:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	select {
	case <-u.first:
		return nil
	default:
	}
	return &UnavailableError{Upstream: u.name, State: StateStarting, Cause: fmt.Errorf(
		"still making its first connection after %s (%s); lists leave it out until it is ready, and sessions are sent list_changed then",
		bound, u.setting("startup_list_wait"))}
}

// AwaitStart waits, as a list does, for an upstream making its first
// connection (bounded by its startup_list_wait); the handshake answers
// (initialize, server/discover) wait so, since hosts gate features on the
// capabilities and instructions of the first answer for a session's whole
// life. It reports nothing: past the bound the answer leaves the upstream
// out, as a list does.
func (u *Upstream) AwaitStart(ctx context.Context) { _ = u.awaitStartForList(ctx) }

// ListChanges returns the list_changed notifications that the upstream's
// arrival or loss means for clients: one per list its latest connection
// offered (tools, prompts, resources). Before it was ever ready it offered
// none, so a first attempt that fails changes no list.
func (u *Upstream) ListChanges() []string {
	u.mu.Lock()
	caps := u.caps
	u.mu.Unlock()
	var out []string
	for _, method := range mcp.ListChangedNotifications() {
		if _, ok := rawjson.Get(caps, mcp.Method(method).ListChanged); ok {
			out = append(out, method)
		}
	}
	return out
}

// remember notes what the shared connection c negotiated, for the next
// connections.
func (u *Upstream) remember(c *client.Client) {
	u.initialized.Store(!c.Modern())
}

// preferInitialize reports whether a connection over t should initialize
// before probing with server/discover: a stdio upstream that initialized
// last time answers the probe with noise on its stderr (a Python-SDK 1.x
// server writes a page of validation errors), at every restart.
func (u *Upstream) preferInitialize(t client.Transport) bool {
	_, stdio := t.(client.Child)
	p := u.cfg.Protocol
	return stdio && (p == "" || p == "auto") && u.initialized.Load()
}

// stderrOptions are the upstream's stderr logging settings.
func stderrOptions(name string, ucfg *config.Upstream, log *zap.Logger, m *metrics.Upstream) client.StderrOptions {
	opts := client.StderrOptions{
		Logger:  log,
		Level:   zapcore.InfoLevel,
		Setting: "upstreams." + name + ".stderr",
		Metrics: m,
	}
	if s := ucfg.Stderr; s != nil {
		if l, err := zapcore.ParseLevel(s.Level); err == nil {
			opts.Level = l
		}
		opts.Rate, opts.Burst, opts.MaxLineBytes = s.Rate.PerSecond(), s.Burst, s.MaxLineBytes
	}
	return opts
}
