package fleet_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFleetBench measures, for the note (not in .ci/run's default path;
// MCPGW_FLEET_BENCH=1): tools/call throughput through HAProxy with one and
// with three replicas, and the latency the Redis path adds to an SSE event
// (a resource update delivered by the replica that got it vs relayed to
// the replica holding the GET stream). Everything — HAProxy, the
// replicas, Redis, the upstream and the clients — shares this machine's
// cores, which bound the numbers.
func TestFleetBench(t *testing.T) {
	if os.Getenv("MCPGW_FLEET_BENCH") != "1" {
		t.Skip("set MCPGW_FLEET_BENCH=1 (and MCPGW_FLEET=1) to measure")
	}
	needFleet(t)
	const callers = 16
	const dur = 5 * time.Second
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			f := startFleet(t, n)
			calls, p50, p99 := throughput(t, f.lb.url(), callers, dur)
			t.Logf("BENCH tools/call through HAProxy, %d replica(s), %d callers: %.0f calls/s, p50 %s, p99 %s", n, callers, calls, p50, p99)
			if n == 3 {
				local, relayed := eventLatency(t, f)
				t.Logf("BENCH resource update on the GET stream: delivered by its replica p50 %s; relayed through Redis p50 %s (+%s)", local, relayed, relayed-local)
			}
		})
	}
}

func throughput(t *testing.T, url string, callers int, dur time.Duration) (perSec float64, p50, p99 time.Duration) {
	clients := make([]*client, callers)
	for i := range clients {
		clients[i] = newClient(t, url)
	}
	var n atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for id := 1; time.Since(start) < dur; id++ {
				t0 := time.Now()
				a := c.call(id, "up__whoami", "")
				if m := a.last(t); m.Error != nil {
					t.Errorf("call: %v", m.Error)
					return
				}
				mine = append(mine, time.Since(t0))
				n.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	if len(lat) == 0 {
		t.Fatal("no call answered")
	}
	return float64(n.Load()) / time.Since(start).Seconds(), lat[len(lat)/2], lat[len(lat)*99/100]
}

// eventLatency: a GET stream on replica r1 (asked directly); subscribed
// through r1 (its own upstream connection gets the update) or through r2
// (relayed): the time from sending up__touch to the update on the stream.
func eventLatency(t *testing.T, f *fleet) (local, relayed time.Duration) {
	measure := func(subVia *replica) time.Duration {
		home := f.replicas[0]
		c := newClient(t, fmt.Sprintf("http://127.0.0.1:%d/mcp", home.port))
		uri := listedURI(t, c)
		get := c.open(http.MethodGet, "", "")
		defer get.close()
		sub := *c
		sub.url = fmt.Sprintf("http://127.0.0.1:%d/mcp", subVia.port)
		if m := sub.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":%q}}`, uri)).last(t); m.Error != nil {
			t.Fatalf("subscribe: %v", m.Error)
		}
		var ds []time.Duration
		for i := range 100 {
			t0 := time.Now()
			sub.call(10+i, "up__touch", "")
			if _, ok := get.next(5 * time.Second); !ok {
				t.Fatal("no update")
			}
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	return measure(f.replicas[0]), measure(f.replicas[1])
}
