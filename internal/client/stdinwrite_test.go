package client

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// Sends from many goroutines at once reach the child as whole lines, each
// exactly once, however they are batched; every Send returns.
func TestStdinWritesBatchWholeLines(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := &Stdio{stdin: w, done: make(chan struct{})}
	got := make(chan map[string]int, 1)
	go func() {
		seen := map[string]int{}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			seen[sc.Text()]++
		}
		got <- seen
	}()
	const senders, each = 32, 200
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// Sizes from a few bytes to past a pipe's buffer, so that
				// some writes are partial and batches large.
				pad := strings.Repeat("x", (g*each+i)%97*((i%50)/49*800+1))
				msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":"%d-%d","method":"m","params":{"p":"%s"}}`, g, i, pad)
				if err := s.Send(context.Background(), []byte(msg)); err != nil {
					t.Errorf("Send: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	w.Close()
	seen := <-got
	if len(seen) != senders*each {
		t.Fatalf("the child read %d distinct lines, want %d", len(seen), senders*each)
	}
	for line, n := range seen {
		if n != 1 || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"`) || !strings.HasSuffix(line, `"}}`) {
			t.Fatalf("line %q read %d times (want once, whole)", line[:min(len(line), 80)], n)
		}
	}
	if s.writing || s.next != nil {
		t.Fatalf("after every Send returned: writing=%v, a batch pending=%v", s.writing, s.next != nil)
	}
}

// A write that fails fails every Send whose line it carried.
func TestStdinWriteErrorReachesItsSenders(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the child is gone: writes fail with EPIPE
	defer w.Close()
	s := &Stdio{stdin: w, done: make(chan struct{})}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Send(context.Background(), []byte(`{"jsonrpc":"2.0","method":"m"}`))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil || !strings.Contains(err.Error(), "write to child stdin") {
			t.Fatalf("Send to a closed pipe: %v, want the write's error", err)
		}
	}
}
