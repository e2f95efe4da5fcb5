package sessions

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

func newUpstreamSessions(t *testing.T, addr string, ttl time.Duration) (*RedisUpstreamSessions, redis.UniversalClient, *prometheus.Registry) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, metrics.Options{NoRuntimeCollectors: true})
	s := NewRedisUpstreamSessions(RedisOptions{Client: c, Prefix: "t:", TTL: ttl, Timeout: 200 * time.Millisecond, Metrics: m.NewRedis()})
	t.Cleanup(s.Close)
	return s, c, reg
}

func httpRecord(id string) UpstreamRecord {
	return UpstreamRecord{ID: id, Init: &mcp.InitializeResult{ProtocolVersion: "2025-11-25", Capabilities: []byte(`{"tools":{}}`), ServerInfo: []byte(`{"name":"u","version":"1"}`)}}
}

// TestRedisUpstreamSessions: the first record of a session's upstream
// session wins and is what others load; only a record found dead is
// replaced; Forget removes a record only while it names the dead id; the
// key holds no bearer session id and expires with the TTL, which Touch
// renews; an oversized record is refused, not stored.
func TestRedisUpstreamSessions(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a, c, reg := newUpstreamSessions(t, srv.Addr, time.Minute)
	b, _, _ := newUpstreamSessions(t, srv.Addr, time.Minute)
	const sess = "s1.the-bearer-session-id"

	if _, ok, err := b.Load(ctx, sess, "st"); ok || err != nil {
		t.Fatalf("Load before any Save: ok=%v err=%v", ok, err)
	}
	steps := []struct {
		name      string
		by        *RedisUpstreamSessions
		id        string
		replacing string
		saved     bool
		standing  string
	}{
		{"the first record is saved", a, "up-1", "", true, "up-1"},
		{"a concurrent second gets the first", b, "up-2", "", false, "up-1"},
		{"replacing a live id other than the standing one does nothing", b, "up-3", "up-0", false, "up-1"},
		{"the standing record found dead is replaced", b, "up-4", "up-1", true, "up-4"},
	}
	for _, st := range steps {
		got, saved, err := st.by.Save(ctx, sess, "st", httpRecord(st.id), st.replacing)
		if err != nil || saved != st.saved || got.ID != st.standing {
			t.Fatalf("%s: Save = %q saved=%v err=%v, want %q saved=%v", st.name, got.ID, saved, err, st.standing, st.saved)
		}
		rec, ok, err := a.Load(ctx, sess, "st")
		if err != nil || !ok || rec.ID != st.standing || rec.Init == nil || rec.Init.ProtocolVersion != "2025-11-25" || string(rec.Init.Capabilities) != `{"tools":{}}` {
			t.Fatalf("%s: Load = %+v ok=%v err=%v", st.name, rec, ok, err)
		}
	}

	keys, err := c.Keys(ctx, "t:*").Result()
	if err != nil || len(keys) != 1 || strings.Contains(keys[0], "bearer") || !strings.HasSuffix(keys[0], ":up:st") {
		t.Fatalf("keys = %v (%v), want one hashed key per session and upstream", keys, err)
	}
	if ttl := c.TTL(ctx, keys[0]).Val(); ttl <= 50*time.Second || ttl > time.Minute {
		t.Errorf("TTL = %v, want about a minute", ttl)
	}
	c.Expire(ctx, keys[0], 10*time.Second)
	a.Touch(sess, "st")
	waitFor(t, "Touch renews the TTL", func() bool { return c.TTL(ctx, keys[0]).Val() > 50*time.Second })

	a.Forget(sess, "st", "up-1") // stale: up-4 stands
	b.Touch(sess, "st")          // queued behind it: once renewed, the Forget ran
	waitFor(t, "the queue ran", func() bool { return c.TTL(ctx, keys[0]).Val() > 50*time.Second })
	if _, ok, _ := a.Load(ctx, sess, "st"); !ok {
		t.Fatal("forgetting a stale id removed the standing record")
	}
	a.Forget(sess, "st", "up-4")
	waitFor(t, "Forget removes the standing record", func() bool { _, ok, _ := b.Load(ctx, sess, "st"); return !ok })

	big := httpRecord("up-5")
	big.Init.Instructions = strings.Repeat("x", maxUpstreamRecord)
	if _, saved, err := a.Save(ctx, sess, "st", big, ""); saved || err == nil || !strings.Contains(err.Error(), "stays this replica's") {
		t.Errorf("oversized Save: saved=%v err=%v, want a refusal", saved, err)
	}
	if _, ok, _ := b.Load(ctx, sess, "st"); ok {
		t.Error("an oversized record was stored")
	}
	if n := (&replica{reg: reg}).counter(t, "mcpgw_redis_dropped_total"); n != 1 {
		t.Errorf("mcpgw_redis_dropped_total = %v, want 1 (the oversized record)", n)
	}

	srv.Stop()
	if _, _, err := a.Load(ctx, sess, "st"); err == nil {
		t.Error("Load with Redis down: no error")
	}
	if n := (&replica{reg: reg}).counter(t, "mcpgw_redis_errors_total"); n < 1 {
		t.Errorf("mcpgw_redis_errors_total = %v with Redis down, want it counted", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Long); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(10 * time.Millisecond) // a poll, bounded by deadline
	}
}
