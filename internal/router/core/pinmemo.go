package core

import (
	"crypto/sha256"
	"sync"

	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// maxPinVerdicts bounds the pinning verdicts remembered for logging once:
// one per tool of every upstream, so a gateway with more tools than this
// forgets some and may log one of them again.
const maxPinVerdicts = 10000

// pinVerdicts remembers the latest pinning verdict logged for each tool
// (by upstream and name), so that a verdict is logged once per definition.
// Keys and definitions are held as hashes and only the latest definition
// of a tool is kept: an upstream that changes a tool on every list costs
// one entry, not one per version. At most max tools are remembered; past
// that an arbitrary one is forgotten (counted in mcpgw_pin_verdicts).
type pinVerdicts struct {
	mu  sync.Mutex
	max int
	m   map[[sha256.Size]byte]pinVerdict
	met *metrics.Metrics
}

type pinVerdict struct {
	status policy.PinStatus
	hash   string // the definition's pin hash ("" when it has none)
}

// fresh records v as tool's latest verdict and reports whether it differs
// from the one remembered (so it is to be logged).
func (p *pinVerdicts) fresh(upstream, tool string, v pinVerdict) bool {
	h := sha256.New()
	h.Write([]byte(upstream))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.m[k]; ok && old == v {
		return false
	}
	if p.m == nil {
		p.m = map[[sha256.Size]byte]pinVerdict{}
	}
	if _, ok := p.m[k]; !ok && len(p.m) >= p.limit() {
		for drop := range p.m { // any one: the bound matters, not which
			delete(p.m, drop)
			break
		}
	}
	p.m[k] = v
	p.met.PinVerdicts(len(p.m))
	return true
}

func (p *pinVerdicts) limit() int {
	if p.max > 0 {
		return p.max
	}
	return maxPinVerdicts
}

// len is how many verdicts are remembered.
func (p *pinVerdicts) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}
