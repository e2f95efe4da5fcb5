// Package testwait holds the waits tests share, so that a test waits for
// the asynchronous thing itself and never for a fixed short time standing
// for it: on a loaded 2-core CI machine under -race any short time can
// elapse first, and then the test fails though the code is right.
//
// Every wait here is bounded by Long, a deadline far above any scheduling
// delay: it only decides how long a test that is really broken takes to
// say so.
package testwait

import (
	"testing"
	"time"
)

// Long bounds every wait: far above any scheduling delay, so that only a
// thing that will never happen reaches it.
const Long = 30 * time.Second

// Until polls cond until it holds, and fails the test naming what it
// waited for if it has not held after Long.
func Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(Long)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %s for %s", Long, what)
		}
		time.Sleep(pause) // a poll of cond, bounded by deadline above
	}
}

// Recv waits for a value on ch, or for ch to be closed, as `<-ch` would,
// failing the test naming what it waited for if neither came after Long.
func Recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	timer := time.NewTimer(Long)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("waited %s for %s", Long, what)
	}
	panic("unreachable")
}
