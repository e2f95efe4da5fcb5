//go:build rawjsoncount

package rawjson

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// The read-counting hook (build tag rawjsoncount, tests only): Watch marks
// a buffer, and every scan of it, of a sub-slice of it, or of a copy an
// edit made of it (Set, SetPath, Delete...) counts as one read. It proves
// that the request path reads a request's params once and hands the view
// down (issue 28), without a cost in the normal build. The registry is
// process-wide because the reads happen deep in packages that take no
// options; only tests built with the tag have it.

// Counter counts the reads of one watched buffer and of what was made of it.
type Counter struct {
	mu    sync.Mutex
	spans [][]byte // the buffers watched; kept referenced so that no address is reused
	reads int
	sites []string // where each read was made from, for a failing test to show
}

var watched struct {
	mu       sync.Mutex
	counters []*Counter
}

// CountingEnabled reports whether this build counts reads.
const CountingEnabled = true

// Watch starts counting the reads of buf. Stop ends it.
func Watch(buf []byte) *Counter {
	c := &Counter{spans: [][]byte{buf}}
	watched.mu.Lock()
	watched.counters = append(watched.counters, c)
	watched.mu.Unlock()
	return c
}

// Reads is how many reads were counted.
func (c *Counter) Reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// Sites are the callers outside rawjson that made each read, in order.
func (c *Counter) Sites() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sites...)
}

// site is the first caller outside this package.
func site() string {
	pcs := make([]uintptr, 16)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.Contains(f.Function, "internal/rawjson.") {
			fn := f.Function[strings.LastIndex(f.Function, "/")+1:]
			return fmt.Sprintf("%s (%s:%d)", fn, f.File[strings.LastIndex(f.File, "/")+1:], f.Line)
		}
		if !more {
			return "?"
		}
	}
}

// Stop ends the counting.
func (c *Counter) Stop() {
	watched.mu.Lock()
	defer watched.mu.Unlock()
	for i, w := range watched.counters {
		if w == c {
			watched.counters = append(watched.counters[:i], watched.counters[i+1:]...)
			break
		}
	}
}

// holds reports whether b lies in one of c's buffers.
func (c *Counter) holds(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, s := range c.spans {
		if cap(s) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
		if p >= lo && p < lo+uintptr(cap(s)) {
			return true
		}
	}
	return false
}

func counters() []*Counter {
	watched.mu.Lock()
	defer watched.mu.Unlock()
	return append([]*Counter(nil), watched.counters...)
}

func noteRead(b []byte) {
	for _, c := range counters() {
		c.mu.Lock()
		if c.holds(b) {
			c.reads++
			c.sites = append(c.sites, site())
		}
		c.mu.Unlock()
	}
}

func noteDerived(from, to []byte) {
	for _, c := range counters() {
		c.mu.Lock()
		if c.holds(from) && !c.holds(to) {
			c.spans = append(c.spans, to)
		}
		c.mu.Unlock()
	}
}
