package serial_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// TestBoundsLegacySSEQueueBytes (issue 27.9): a legacy HTTP+SSE client
// that reads its endpoint event and then nothing, while it POSTs calls
// with 256 KiB answers. What waits for it is bounded in bytes
// (sessions.queue_bytes, 2 MiB here), not only in messages: answers past
// it are replaced by the -32004 refusal, and once the bound is reached its
// new requests get 429 naming sessions.queue_bytes. Before the fix the
// session held every answer up to sse_queue and max_requests_per_session
// (128 × 256 KiB here) and no request was refused for bytes.
func TestBoundsLegacySSEQueueBytes(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	_, base, m := gatewaytest.BoundsGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
upstreams:
  alpha: {url: %s}
sessions:
  sse_write_timeout: 60s
  queue_bytes: 2097152
`, alpha), true)
	send, _ := gatewaytest.MuteLegacySession(t, base)

	rss0 := gatewaytest.RSS()
	text := strings.Repeat("x", 256<<10)
	call := func(id int) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"` + text + `"}}}`
	}
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range ids {
				st, _, _ := send(call(i))
				mu.Lock()
				counts[st]++
				mu.Unlock()
			}
		})
	}
	for i := 1; i <= 100; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()
	// Once what was taken is answered, the session's queue is full in
	// bytes: its next request is refused for that.
	var st int
	var h http.Header
	var b []byte
	id := 1000
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) { // a poll, bounded by deadline
		id++
		if st, h, b = send(call(id)); st == http.StatusTooManyRequests && strings.Contains(string(b), "sessions.queue_bytes") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request refused for sessions.queue_bytes (last: HTTP %d %s); statuses of the first 100: %v", st, b, counts)
		}
	}
	gatewaytest.WantRefusal(t, "POST past queue_bytes", st, h, b, http.StatusTooManyRequests, "sessions.queue_bytes", strconv.Itoa(id))
	t.Logf("100 POSTs to a client that never reads: HTTP statuses %v; RSS %.0f -> %.0f MB; %v answers or requests refused for bytes",
		counts, rss0, gatewaytest.RSS(), gatewaytest.Refusals(t, m, "sessions.queue_bytes"))
	if n := gatewaytest.Refusals(t, m, "sessions.queue_bytes"); n < 2 {
		t.Errorf("mcpgw_limit_refusals_total{bound=sessions.queue_bytes} = %v, want answers past the bound refused too", n)
	}
}
