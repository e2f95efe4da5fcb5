package sessions

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgw/mcpgw/internal/gatewaytest/redistest"
)

// BenchmarkSeal is the cost of sealing one session id (AES-GCM over the
// claims): paid once per initialize.
func BenchmarkSeal(b *testing.B) {
	keys, _ := ParseSessionKeys([]byte("q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n"))
	s, _ := newSealer(keys)
	c := sessionClaims{Route: "/mcp", Owner: "key:ci-bot", Version: "2025-11-25", Caps: []byte(`{"roots":{"listChanged":true},"sampling":{}}`), Info: []byte(`{"name":"client","version":"1.0.0"}`), Issued: time.Now().Unix()}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.seal(c)
	}
}

// BenchmarkOpen is the cost of opening one (with the second key of a
// rotated ring, the slow case): paid when a replica first sees a session.
func BenchmarkOpen(b *testing.B) {
	oldKeys, _ := ParseSessionKeys([]byte("00112233445566778899aabbccddeeff\n"))
	ring, _ := ParseSessionKeys([]byte("q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n00112233445566778899aabbccddeeff\n"))
	old, _ := newSealer(oldKeys)
	cur, _ := newSealer(ring)
	now := time.Now()
	for _, bc := range []struct {
		name string
		id   string
	}{
		{"first-key", cur.seal(sessionClaims{Route: "/mcp", Owner: "key:ci-bot", Version: "2025-11-25", Issued: now.Unix()})},
		{"second-key", old.seal(sessionClaims{Route: "/mcp", Owner: "key:ci-bot", Version: "2025-11-25", Issued: now.Unix()})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := cur.open(bc.id, now); !ok {
					b.Fatal("did not open")
				}
			}
		})
	}
}

// BenchmarkRedisRelay is one server→client message's trip through Redis
// from the replica that has it to the replica holding the session's
// stream (publish, pub/sub, deliver) over a real local redis-server: the
// latency the Redis path adds to an SSE event. Skipped without
// redis-server.
func BenchmarkRedisRelay(b *testing.B) {
	srv := redistest.Start(b)
	mk := func() *RedisRelay {
		o := benchOptions(b, srv.Addr)
		r := NewRedisRelay(o)
		b.Cleanup(r.Close)
		return r
	}
	holder, sender := mk(), mk()
	got := make(chan struct{}, 1)
	release := holder.Hold("s", func([]byte) { got <- struct{}{} })
	defer release()
	// Wait for the subscription to be in place.
	for deadline := time.Now().Add(5 * time.Second); ; {
		sender.Publish("s", []byte("ping"))
		select {
		case <-got:
		case <-time.After(50 * time.Millisecond): // a poll (publish again), bounded by deadline
			if time.Now().After(deadline) {
				b.Fatal("never delivered")
			}
			continue
		}
		break
	}
	msg := []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///doc"}}`)
	b.ResetTimer()
	for b.Loop() {
		sender.Publish("s", msg)
		select {
		case <-got:
		case <-time.After(5 * time.Second): // a benchmark's bound on a lost message
			b.Fatal("lost")
		}
	}
}

func benchOptions(b *testing.B, addr string) RedisOptions {
	b.Helper()
	o := fleetOptionsTB(b, addr, prometheus.NewRegistry())
	o.Queue = 1024
	return o
}
