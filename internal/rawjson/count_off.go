//go:build !rawjsoncount

package rawjson

// Without the rawjsoncount build tag the read-counting hook (count_on.go)
// is compiled out: these are empty and inlined away.

func noteRead([]byte)         {}
func noteDerived(_, _ []byte) {}

// CountingEnabled reports whether this build counts reads (count_on.go).
const CountingEnabled = false
