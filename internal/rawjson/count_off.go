//go:build !rawjsoncount

package rawjson

// Without the rawjsoncount build tag the read-counting hook (count_on.go)
// is compiled out: these are empty and inlined away.

func noteRead([]byte)         {}
func noteDerived(_, _ []byte) {}

// CountingEnabled reports whether this build counts reads (count_on.go).
const CountingEnabled = false

// Counter counts nothing in this build (count_on.go counts).
type Counter struct{}

// Watch is a no-op in this build.
func Watch([]byte) *Counter { return &Counter{} }

// Reads is 0 in this build.
func (*Counter) Reads() int { return 0 }

// Sites is nil in this build.
func (*Counter) Sites() []string { return nil }

// Stop is a no-op in this build.
func (*Counter) Stop() {}
