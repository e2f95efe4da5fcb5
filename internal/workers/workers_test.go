package workers

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/testwait"
)

// waitFor polls cond for up to testwait.Long.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, what, cond)
}

func TestGoReusesIdleGoroutines(t *testing.T) {
	p := New(4, time.Hour)
	defer p.Close()
	for i := 0; i < 100; i++ {
		done := make(chan struct{})
		if !p.Go(func() { close(done) }) {
			t.Fatal("Go refused on an open pool")
		}
		<-done
		waitFor(t, "the worker to park", func() bool { return p.Idle() == 1 })
	}
	if got := p.Started(); got != 1 {
		t.Fatalf("100 tasks one after another started %d goroutines, want 1", got)
	}
}

func TestIdleIsBounded(t *testing.T) {
	const maxIdle = 3
	p := New(maxIdle, time.Hour)
	defer p.Close()
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(10)
	for i := 0; i < 10; i++ {
		p.Go(func() { running.Done(); <-release })
	}
	running.Wait()
	if got := p.Started(); got != 10 {
		t.Fatalf("10 tasks at once started %d goroutines, want 10", got)
	}
	close(release)
	// Seven end, three stay; wait until the count settles at the bound.
	waitFor(t, "the idle count to reach its bound", func() bool { return p.Idle() == maxIdle })
	// A negative check (the count stays at the bound): a wait cut short
	// by load only misses a failure, never makes one.
	time.Sleep(20 * time.Millisecond)
	if got := p.Idle(); got != maxIdle {
		t.Fatalf("idle goroutines = %d after the load, want the bound %d", got, maxIdle)
	}
}

func TestIdleGoroutinesEnd(t *testing.T) {
	p := New(8, 10*time.Millisecond)
	defer p.Close()
	var wg sync.WaitGroup
	wg.Add(5)
	for i := 0; i < 5; i++ {
		p.Go(func() { wg.Done(); time.Sleep(time.Millisecond) }) // tasks that take a while: the behaviour under test
	}
	wg.Wait()
	waitFor(t, "idle goroutines to end after idleFor", func() bool { return p.Idle() == 0 })
	// A task after the trim starts a goroutine again.
	before := p.Started()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	if p.Started() != before+1 {
		t.Fatalf("a task after every idle goroutine ended did not start one")
	}
}

func TestCloseWaitsAndRefuses(t *testing.T) {
	p := New(8, time.Hour)
	var ran atomic.Bool
	started := make(chan struct{})
	p.Go(func() {
		close(started)
		time.Sleep(50 * time.Millisecond) // a task still running when Close is called: the behaviour under test
		ran.Store(true)
	})
	<-started
	p.Close()
	if !ran.Load() {
		t.Fatal("Close returned before the running task ended")
	}
	if p.Go(func() { t.Error("a task ran after Close") }) {
		t.Fatal("Go after Close reported true")
	}
	if p.Idle() != 0 {
		t.Fatalf("%d goroutines idle after Close", p.Idle())
	}
	p.Close() // twice is fine
}

func TestConcurrentGoAndClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		p := New(4, time.Millisecond)
		var ran, refused atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					if !p.Go(func() { ran.Add(1) }) {
						refused.Add(1)
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%3) * time.Millisecond) // Close at varied moments: the behaviour under test
		p.Close()
		n := ran.Load() // every accepted task ran before Close returned
		wg.Wait()
		if got := ran.Load() + refused.Load(); got != 400 || ran.Load() != n {
			t.Fatalf("round %d: ran %d (%d at Close) + refused %d, want 400 with none after Close", round, ran.Load(), n, refused.Load())
		}
	}
}

func BenchmarkPoolGo(b *testing.B) {
	p := New(64, time.Hour)
	defer p.Close()
	var wg sync.WaitGroup
	b.ReportAllocs()
	for b.Loop() {
		wg.Add(1)
		p.Go(wg.Done)
		wg.Wait()
	}
}

func BenchmarkGoStatement(b *testing.B) {
	var wg sync.WaitGroup
	b.ReportAllocs()
	for b.Loop() {
		wg.Add(1)
		go wg.Done()
		wg.Wait()
	}
}

// deep uses about n KiB of stack, as a call's round trip and JSON check do.
//
//go:noinline
func deep(n int) byte {
	var frame [1024]byte
	frame[n%1024] = byte(n)
	if n == 0 {
		return frame[0]
	}
	return deep(n-1) + frame[n%1024]
}

// The win the pool is for: a task that goes 16 KiB deep grows a fresh
// goroutine's stack every time, a kept goroutine's once.
func BenchmarkDeepTask(b *testing.B) {
	b.Run("pool", func(b *testing.B) {
		p := New(64, time.Hour)
		defer p.Close()
		var wg sync.WaitGroup
		for b.Loop() {
			wg.Add(1)
			p.Go(func() { deep(16); wg.Done() })
			wg.Wait()
		}
	})
	b.Run("go", func(b *testing.B) {
		var wg sync.WaitGroup
		for b.Loop() {
			wg.Add(1)
			go func() { deep(16); wg.Done() }()
			wg.Wait()
		}
	})
}
