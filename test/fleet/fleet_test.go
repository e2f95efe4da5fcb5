// Package fleet_test runs mcpgw as a fleet of real processes — redis-server
// on a loopback port, three gateway replicas of the built binary with one
// config and one key ring, HAProxy round-robin in front with no
// stickiness — and checks, through HAProxy only, what sessions.redis
// promises (issue 14's Must-show): calls spread and all succeed, a cut
// stream resumes on another replica, a resource update reaches a GET
// stream on another replica, a fleet-wide rate limit holds, a stateful
// HTTP upstream's session is continued by every replica, Redis killed
// and back degrades and recovers, and a key rotation drops no session.
//
// It runs in .ci/run's own step (MCPGW_FLEET=1); elsewhere it is skipped.
package fleet_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
	mcpgw "github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

const (
	key1 = "q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w="
	key2 = "bm90LWEtcmVhbC1rZXktanVzdC1mb3ItdGhlLXRlc3Q="
	// limitRate is the fleet-wide limit of up__limited, in calls per
	// second; limitBurst its bucket, enough to ride out the scheduling
	// stalls of a busy machine (a bucket of 1 loses every slot no call
	// arrives in).
	limitRate  = 40
	limitBurst = 4
)

// fleet is the running system.
type fleet struct {
	t        *testing.T
	dir      string
	redis    *redistest.Server
	up       *upstream
	replicas []*replica
	lb       *haproxy
	keys     string
}

func needFleet(t *testing.T) {
	if os.Getenv("MCPGW_FLEET") != "1" {
		t.Skip("the fleet test runs real processes (redis-server, haproxy, three mcpgw); .ci/run runs it with MCPGW_FLEET=1")
	}
	for _, bin := range []string{"redis-server", "haproxy", "node"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found; .ci/run installs it (apt-get install %s)", bin, bin)
		}
	}
}

func startFleet(t *testing.T, n int) *fleet {
	t.Helper()
	f := &fleet{t: t, dir: t.TempDir()}
	f.redis = redistest.Start(t)
	f.up = newUpstream()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.up.srv }, nil))
	t.Cleanup(ts.Close)
	st := httptest.NewServer(f.up.statefulHandler())
	t.Cleanup(st.Close)
	f.keys = filepath.Join(f.dir, "session-keys")
	if err := os.WriteFile(f.keys, []byte(key1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(f.dir, "mcpgw.yaml")
	// One config for every replica; only the environment differs (the
	// listen addresses, and the name the upstream is told).
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: ${MCPGW_LISTEN}
admin: {listen: "${MCPGW_ADMIN}"}
upstreams:
  up:
    url: %s
    headers: {X-Replica: "${REPLICA}"}
  st:
    url: %s
    stateful: true
    headers: {X-Replica: "${REPLICA}"}
sessions:
  key_file: %s
  redis: {addr: %q, key_prefix: "fleet:", read_timeout: 300ms, dial_timeout: 300ms}
policy:
  default: allow
  rate_limits:
    tools:
      - {tool: up__limited, rate: %d/s, burst: %d}
`, ts.URL, st.URL, f.keys, f.redis.Addr, limitRate, limitBurst)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildGateway(t, f.dir)
	for i := range n {
		r := &replica{t: t, name: fmt.Sprintf("r%d", i+1), bin: bin, config: cfg, port: freePort(t), admin: freePort(t), log: filepath.Join(f.dir, fmt.Sprintf("r%d.log", i+1))}
		r.start()
		t.Cleanup(r.stop)
		f.replicas = append(f.replicas, r)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range f.replicas {
				t.Logf("--- %s log:\n%s", r.name, r.tail())
			}
		}
	})
	f.lb = startHAProxy(t, f.dir, f.replicas)
	return f
}

func (f *fleet) replica(name string) *replica {
	for _, r := range f.replicas {
		if r.name == name {
			return r
		}
	}
	f.t.Fatalf("no replica %q", name)
	return nil
}

// sum adds a metric over the replicas.
func (f *fleet) sum(name string, labels ...string) float64 {
	s := 0.0
	for _, r := range f.replicas {
		s += r.metric(name, labels...)
	}
	return s
}

// eventually polls cond for up to d, or testwait.Long if that is longer:
// it returns once cond holds, and a short bound fails a right test on a
// loaded machine.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = max(d, testwait.Long)
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond) // a poll, bounded by deadline
	}
}

// TestFleet is the Must-show of issue 14, each check a subtest over one
// fleet, in order (Redis is killed and rotated late).
func TestFleet(t *testing.T) {
	needFleet(t)
	f := startFleet(t, 3)

	t.Run("CallsSpreadOverReplicas", func(t *testing.T) { testSpread(t, f) })
	t.Run("TypeScriptClientThroughHAProxy", func(t *testing.T) { testTypeScript(t, f) })
	t.Run("CutStreamResumesOnAnotherReplica", func(t *testing.T) { testResume(t, f, 12) })
	t.Run("ResourceUpdateReachesStreamOnAnotherReplica", func(t *testing.T) { testSubscription(t, f) })
	t.Run("FleetWideRateLimit", func(t *testing.T) { testRateLimit(t, f) })
	t.Run("StatefulHTTPUpstreamSessionOnEveryReplica", func(t *testing.T) { testStateful(t, f) })
	t.Run("RedisKilledCallsGoOnAndRecover", func(t *testing.T) { testRedisDown(t, f) })
	t.Run("KeyRotationDropsNoSession", func(t *testing.T) { testRotation(t, f) })
}

// testSpread: one legacy session's calls land on every replica (the
// upstream names the replica whose connection ran each; HAProxy names the
// replica that served each POST) and all succeed.
func testSpread(t *testing.T, f *fleet) {
	c := newClient(t, f.lb.url())
	ran, served := map[string]int{}, map[string]int{}
	const n = 30
	for i := range n {
		a := c.call(i+1, "up__whoami", "")
		txt := resultText(t, a.last(t))
		who, ok := strings.CutPrefix(txt, "replica=")
		if !ok {
			t.Fatalf("call %d: %q", i, txt)
		}
		ran[who]++
		served[a.by]++
		if who != a.by {
			t.Errorf("call %d served by %s but ran on %s's upstream connection", i, a.by, who)
		}
	}
	t.Logf("calls of one session: ran on %v", ran)
	for _, r := range f.replicas {
		if ran[r.name] < n/6 {
			t.Errorf("replica %s ran %d of %d calls (all: %v): not spread", r.name, ran[r.name], n, ran)
		}
	}
}

// testStateful: one session's calls on the stateful HTTP upstream "st"
// land on several replicas and all continue one upstream session: the
// upstream counts 1, 2, 3, ... in one session and was initialized once.
func testStateful(t *testing.T, f *fleet) {
	c := newClient(t, f.lb.url())
	before := f.up.inits.Load()
	ran := map[string]int{}
	const n = 12
	for i := range n {
		txt := resultText(t, c.call(i+1, "st__count", "").last(t))
		var got int
		var who string
		if _, err := fmt.Sscanf(txt, "count=%d on %s", &got, &who); err != nil || got != i+1 {
			t.Fatalf("call %d: %q, want count=%d (one upstream session)", i+1, txt, i+1)
		}
		ran[who]++
	}
	t.Logf("one session's stateful calls ran on %v", ran)
	if len(ran) < 2 {
		t.Errorf("the calls ran on %v: want more than one replica", ran)
	}
	if d := f.up.inits.Load() - before; d != 1 {
		t.Errorf("the stateful upstream was initialized %d times for the session, want 1", d)
	}
}

// testTypeScript: the TypeScript SDK client, through HAProxy: a session
// whose calls and GET stream land on different replicas, and a resource
// update that reaches its stream.
func testTypeScript(t *testing.T, f *fleet) {
	script := filepath.Join(repoRoot(t), "test", "interop", "fleet.client.mjs")
	cmd := exec.Command("node", script, f.lb.url())
	cmd.Dir = filepath.Dir(script)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node fleet.client.mjs: %v\n%s\n%s", err, out, stderr)
	}
	var rep struct {
		Replicas []string       `json:"replicas"`
		Tools    []string       `json:"tools"`
		Updated  string         `json:"updated"`
		MS       map[string]int `json:"ms"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("fleet.client.mjs printed %q: %v", out, err)
	}
	distinct := slices.Compact(slices.Sorted(slices.Values(rep.Replicas)))
	t.Logf("TypeScript client: calls ran on %v; update for %s; ms since start %v", distinct, rep.Updated, rep.MS)
	if len(rep.Replicas) != 12 || len(distinct) < 2 {
		t.Errorf("TypeScript client's 12 calls ran on %v: want all answered, on more than one replica", rep.Replicas)
	}
	if !slices.Contains(rep.Tools, "up__whoami") {
		t.Errorf("tools/list through HAProxy: %v", rep.Tools)
	}
	if rep.Updated == "" {
		t.Error("the TypeScript client's GET stream got no notifications/resources/updated")
	}
}

// testResume: a call's SSE stream cut after a few events is resumed with
// Last-Event-ID through HAProxy on another replica: every progress event
// and the answer arrive once, in order, with increasing event ids.
func testResume(t *testing.T, f *fleet, n int) {
	c := newClient(t, f.lb.url())
	s := c.open(http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__ticks","arguments":{"n":%d,"ms":80},"_meta":{"progressToken":"pt"}}}`, n), "")
	var evs []event
	for len(evs) < 3 {
		ev, ok := s.next(10 * time.Second)
		if !ok {
			t.Fatal("the call's stream ended before 3 events")
		}
		evs = append(evs, ev)
	}
	s.close() // the cut
	cut := len(evs)
	var r *stream
	for {
		// Round robin sends the next request elsewhere; another client's
		// request in between could send it back, so ask until it is.
		r = c.open(http.MethodGet, "", evs[len(evs)-1].id)
		if r.by != s.by {
			break
		}
		r.close()
		c.call(99, "up__whoami", "")
	}
	for {
		ev, ok := r.next(10 * time.Second)
		if !ok {
			break
		}
		evs = append(evs, ev)
		if ev.msg.ID != nil {
			break
		}
	}
	r.close()
	t.Logf("POST on %s, cut after %d events, resumed on %s: %d events", s.by, cut, r.by, len(evs))
	seenIDs := map[string]bool{}
	for i, ev := range evs {
		if seenIDs[ev.id] || ev.id == "" {
			t.Errorf("event %d: id %q empty or repeated", i, ev.id)
		}
		seenIDs[ev.id] = true
	}
	if len(evs) != n+1 {
		t.Fatalf("got %d events, want %d progress + 1 answer", len(evs), n)
	}
	for i, ev := range evs[:n] {
		var p struct {
			Progress float64 `json:"progress"`
		}
		if ev.msg.Method != "notifications/progress" || json.Unmarshal(ev.msg.Params, &p) != nil || int(p.Progress) != i+1 {
			t.Errorf("event %d: %s %s, want progress %d", i, ev.msg.Method, ev.msg.Params, i+1)
		}
	}
	if txt := resultText(t, evs[n].msg); !strings.HasPrefix(txt, fmt.Sprintf("ticked %d on ", n)) {
		t.Errorf("answer %q", txt)
	}
	if r.by == s.by {
		t.Errorf("resumed on the same replica %s", r.by)
	}
}

// listedURI is the gateway's name for the upstream's mem://doc.
func listedURI(t *testing.T, c *client) string {
	t.Helper()
	m := c.post(`{"jsonrpc":"2.0","id":50,"method":"resources/list"}`).last(t)
	var r struct {
		Resources []struct {
			URI  string `json:"uri"`
			Name string `json:"name"`
		} `json:"resources"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		t.Fatalf("resources/list: %v %s", m.Error, m.Result)
	}
	for _, res := range r.Resources {
		if strings.Contains(res.URI, "doc") {
			return res.URI
		}
	}
	t.Fatalf("resources/list: no doc in %s", m.Result)
	return ""
}

// testSubscription: GET stream on replica X, resources/subscribe served by
// Y ≠ X (so Y's upstream connection holds the subscription), the update
// caused through a third request: the notification reaches the stream on
// X, relayed through Redis by Y.
func testSubscription(t *testing.T, f *fleet) {
	c := newClient(t, f.lb.url())
	uri := listedURI(t, c)
	get := c.open(http.MethodGet, "", "")
	defer get.close()
	var subBy string
	for {
		a := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":51,"method":"resources/subscribe","params":{"uri":%q}}`, uri))
		if m := a.last(t); m.Error != nil {
			t.Fatalf("subscribe: %v", m.Error)
		}
		subBy = a.by
		if subBy != get.by {
			break
		}
		c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":52,"method":"resources/unsubscribe","params":{"uri":%q}}`, uri))
	}
	relayed := f.replica(subBy).metric("mcpgw_redis_relayed_total", `outcome="delivered"`)
	touch := c.call(53, "up__touch", "")
	t.Logf("GET stream on %s, subscribed through %s, touched through %s (%s)", get.by, subBy, touch.by, resultText(t, touch.last(t)))
	ev, ok := get.next(10 * time.Second)
	if !ok {
		t.Fatalf("no resources/updated on the GET stream held by %s", get.by)
	}
	var p struct {
		URI string `json:"uri"`
	}
	if ev.msg.Method != "notifications/resources/updated" || json.Unmarshal(ev.msg.Params, &p) != nil || p.URI != uri {
		t.Fatalf("GET stream got %s %s, want resources/updated for %s", ev.msg.Method, ev.msg.Params, uri)
	}
	if got := f.replica(subBy).metric("mcpgw_redis_relayed_total", `outcome="delivered"`); got != relayed+1 {
		t.Errorf("%s relayed %v updates through Redis, want 1", subBy, got-relayed)
	}

	// Subscribed again through another replica: still held once (one
	// upstream subscription, one update per change).
	upSubs := f.up.subscribes()
	for {
		a := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":54,"method":"resources/subscribe","params":{"uri":%q}}`, uri))
		if m := a.last(t); m.Error != nil {
			t.Fatalf("subscribe again: %v", m.Error)
		}
		if a.by != subBy {
			break
		}
	}
	c.call(55, "up__touch", "")
	if _, ok := get.next(10 * time.Second); !ok {
		t.Fatal("no update after subscribing again")
	}
	if ev, ok := get.next(time.Second); ok { // a negative check: a wait cut short only misses a failure
		t.Errorf("a second update for one change (%s %s): the subscription is held twice", ev.msg.Method, ev.msg.Params)
	}
	if now := f.up.subscribes(); !maps.Equal(now, upSubs) {
		t.Errorf("upstream subscriptions went from %v to %v: subscribing again through another replica subscribed upstream again", upSubs, now)
	}

	// Unsubscribed through another replica than the holder: the holder
	// unsubscribes upstream, and no more updates come.
	get2 := c.open(http.MethodGet, "", "")
	defer get2.close()
	before := count(&f.up.unsubs, subBy)
	for {
		a := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":56,"method":"resources/unsubscribe","params":{"uri":%q}}`, uri))
		if m := a.last(t); m.Error != nil {
			t.Fatalf("unsubscribe: %v", m.Error)
		}
		if a.by != subBy {
			break
		}
		c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":57,"method":"resources/subscribe","params":{"uri":%q}}`, uri))
	}
	eventually(t, 5*time.Second, subBy+" unsubscribes upstream after an unsubscribe through another replica", func() bool {
		return count(&f.up.unsubs, subBy) > before
	})
	c.call(58, "up__touch", "")
	if ev, ok := get2.next(1500 * time.Millisecond); ok { // a negative check, as above
		t.Errorf("after unsubscribe the stream still got %s %s", ev.msg.Method, ev.msg.Params)
	}
}

// testRateLimit: up__limited is limited to limitRate calls/s for the
// fleet; eight callers over three replicas for three seconds get no more
// than 10% over burst + rate × time, while each replica alone would allow
// three times that. The lower bound is wide: a busy machine's stalls lose
// the refills no call arrived for, which says nothing of the limit.
func testRateLimit(t *testing.T, f *fleet) {
	const callers = 8
	const dur = 3 * time.Second
	var ok, refused, other atomic.Int64
	var mu sync.Mutex
	served := map[string]int{}
	clients := make([]*client, callers)
	for i := range clients {
		clients[i] = newClient(t, f.lb.url())
	}
	// The bucket is full whatever came before: a refill on the wall clock,
	// and a sleep is never shorter than asked, so load cannot break it.
	time.Sleep(time.Second)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func(c *client) {
			defer wg.Done()
			for id := 1; time.Since(start) < dur; id++ {
				a := c.call(id, "up__limited", "")
				if len(a.msgs) == 0 {
					other.Add(1)
					continue
				}
				m := a.msgs[len(a.msgs)-1]
				switch {
				case m.Error == nil:
					ok.Add(1)
					mu.Lock()
					served[a.by]++
					mu.Unlock()
				case m.Error.Code == mcpgw.CodeRateLimited:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		}(clients[i])
	}
	wg.Wait()
	elapsed := time.Since(start)
	want := limitBurst + limitRate*elapsed.Seconds()
	got := float64(ok.Load())
	t.Logf("rate limit %d/s over %s: %v allowed (want %.0f, at most +10%%), %d refused, spread %v", limitRate, elapsed.Round(time.Millisecond), got, want, refused.Load(), served)
	if other.Load() > 0 {
		t.Errorf("%d calls neither allowed nor rate limited", other.Load())
	}
	if got > 1.1*want {
		t.Errorf("allowed %v calls, want at most %.0f (+10%%): the limit does not hold for the fleet", got, want)
	}
	if got < 0.5*want {
		t.Errorf("allowed %v calls, want about %.0f: the limit refuses what it should allow", got, want)
	}
	// A per-replica limit would have allowed all of a load this far over
	// the fleet's limit (up to three times it): the upper bound tells the two apart.
	if offered := got + float64(refused.Load()); offered < 1.5*want {
		t.Errorf("only %v calls offered (%d refused): the load did not exceed the limit enough to test it", offered, refused.Load())
	}
	if len(served) != len(f.replicas) {
		t.Errorf("allowed calls served by %v: want every replica", served)
	}
}

// testRedisDown: redis-server killed mid-test: calls and new sessions go
// on, every replica reports mcpgw_redis_up 0 and /readyz stays 200 with
// redis degraded; once Redis is back, they report up and a cut stream
// resumes on another replica again.
func testRedisDown(t *testing.T, f *fleet) {
	c := newClient(t, f.lb.url())
	f.redis.Stop()
	for _, r := range f.replicas {
		eventually(t, 10*time.Second, r.name+" reports mcpgw_redis_up 0", func() bool { return r.metric("mcpgw_redis_up") == 0 })
		code, body := httpGet(r.adminURL("/readyz"))
		var rd struct {
			Ready bool `json:"ready"`
			Redis struct {
				State string `json:"state"`
			} `json:"redis"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &rd) != nil || !rd.Ready || rd.Redis.State != "degraded" {
			t.Errorf("%s /readyz with Redis down: %d %s; want 200, ready, redis degraded", r.name, code, body)
		}
	}
	served := map[string]int{}
	for i := range 9 {
		a := c.call(100+i, "up__whoami", "")
		resultText(t, a.last(t))
		served[a.by]++
	}
	fresh := newClient(t, f.lb.url()) // a new session too
	resultText(t, fresh.call(1, "up__whoami", "").last(t))
	limited := fresh.call(2, "up__limited", "").last(t) // per-replica buckets now
	if limited.Error != nil && limited.Error.Code != mcpgw.CodeRateLimited {
		t.Errorf("up__limited with Redis down: %v", limited.Error)
	}
	t.Logf("with Redis down, calls served by %v", served)
	if len(served) != len(f.replicas) {
		t.Errorf("with Redis down, calls reached only %v", served)
	}
	if fb := f.sum("mcpgw_rate_limit_local_fallback_total"); fb < 1 {
		t.Errorf("mcpgw_rate_limit_local_fallback_total = %v with Redis down, want the fallback counted", fb)
	}

	f.redis.Restart()
	for _, r := range f.replicas {
		eventually(t, 15*time.Second, r.name+" reports mcpgw_redis_up 1", func() bool { return r.metric("mcpgw_redis_up") == 1 })
		_, body := httpGet(r.adminURL("/readyz"))
		if !strings.Contains(body, `"state":"up"`) {
			t.Errorf("%s /readyz after Redis came back: %s", r.name, body)
		}
	}
	testResume(t, f, 6) // shared state works again
	resultText(t, c.call(200, "up__whoami", "").last(t))
}

// testRotation: a new key put first in the key file (the old one kept) and
// every replica sent SIGHUP: the session made before goes on, on every
// replica — including one restarted after the rotation, which knows the
// session only from its token — and new sessions work everywhere.
func testRotation(t *testing.T, f *fleet) {
	old := newClient(t, f.lb.url())
	if err := os.WriteFile(f.keys, []byte("# rotated\n"+key2+"\n"+key1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.replicas {
		before := r.metric("mcpgw_config_reloads_total", `result="success"`)
		r.signal(syscall.SIGHUP)
		eventually(t, 10*time.Second, r.name+" reloaded", func() bool {
			return r.metric("mcpgw_config_reloads_total", `result="success"`) > before
		})
	}
	fresh := newClient(t, f.lb.url())
	if fresh.session == old.session {
		t.Fatal("same session id twice")
	}
	// A replica restarted after the rotation: the old session reaches it
	// with nothing in memory.
	r3 := f.replicas[2]
	r3.stop()
	r3.start()
	eventually(t, 10*time.Second, "haproxy sees "+r3.name+" again", func() bool {
		for range 3 {
			if a := newClientQuiet(f.lb.url()); a == r3.name {
				return true
			}
		}
		return false
	})
	for i, c := range []*client{old, fresh} {
		served := map[string]int{}
		for i := range 9 {
			a := c.call(300+i, "up__whoami", "")
			if a.status != http.StatusOK {
				t.Fatalf("session after rotation: HTTP %d from %s", a.status, a.by)
			}
			resultText(t, a.last(t))
			served[a.by]++
		}
		if len(served) != len(f.replicas) {
			t.Errorf("after rotation a session reached only %v", served)
		}
		t.Logf("after rotation (and %s restarted), the session made %s it served by %v", r3.name, []string{"before", "after"}[i], served)
	}
}

// newClientQuiet asks HAProxy once and returns which replica answered.
func newClientQuiet(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	resp.Body.Close()
	return resp.Header.Get("X-Served-By")
}
