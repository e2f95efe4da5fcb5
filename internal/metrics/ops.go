package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgw/mcpgw/internal/mcp"
)

// Operators' questions about requests: how long they take, by route and
// method (mcpgw_request_duration_seconds), and which tool, prompt or
// resource they were about (mcpgw_tool_calls_total and its siblings).
//
// The per-name label is bounded: each kind admits at most MaxNames distinct
// names (admin.max_metric_names), and the rest are counted under "other"
// (mcpgw_metric_names_overflow_total says how often). A name is admitted
// only by a request that reached its upstream (outcome ok, error, timeout
// or unavailable), so a client sending made-up names, which are refused as
// invalid or denied, cannot use up the bound. Resources are labelled by
// their URI's scheme and authority ("file://", "github://repos"), since
// URIs are as many as the files behind them.

// DefaultMaxNames is the per-kind bound when Options.MaxNames is 0.
const DefaultMaxNames = 200

// OtherName is the label of the names past the bound.
const OtherName = "other"

// maxNameLen bounds one label value.
const maxNameLen = 128

// durationBuckets cover a ping (ms) to a long tool call (minutes).
var durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// per-name kinds: their families and label names.
const (
	kindTool = iota
	kindPrompt
	kindResource
	numKinds
)

var kindFamilies = [numKinds]struct{ calls, duration, label, what string }{
	{"tool_calls_total", "tool_call_duration_seconds", "tool", "tools/call requests"},
	{"prompt_gets_total", "prompt_get_duration_seconds", "prompt", "prompts/get requests"},
	{"resource_reads_total", "resource_read_duration_seconds", "resource", "resources/read requests"},
}

var kindNames = [numKinds]string{"tool", "prompt", "resource"}

type opsMetrics struct {
	duration *prometheus.HistogramVec // route, method
	routes   sync.Map                 // route -> *opsRoute

	calls    [numKinds]*prometheus.CounterVec   // route, name, outcome
	callDur  [numKinds]*prometheus.HistogramVec // route, name
	overflow *prometheus.CounterVec             // kind
	overOf   [numKinds]prometheus.Counter
	max      int

	mu     sync.RWMutex
	names  [numKinds]map[string]bool // admitted names
	series map[targetKey]*targetSeries
}

type opsRoute struct {
	durations []lazy[prometheus.Observer] // by method index, len(Methods)
}

type targetKey struct {
	kind        int
	route, name string
}

type targetSeries struct {
	label    string // the name, or OtherName
	outcomes [numOutcomes]lazy[prometheus.Counter]
	duration prometheus.Observer
}

func newOpsMetrics(f factory, maxNames int) *opsMetrics {
	if maxNames <= 0 {
		maxNames = DefaultMaxNames
	}
	o := &opsMetrics{max: maxNames, series: map[targetKey]*targetSeries{}}
	o.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "request_duration_seconds",
		Help:    "Time from a downstream request's dispatch to its answer, by route and method (the gateway's own latency plus the upstream's).",
		Buckets: durationBuckets,
	}, []string{"route", "method"})
	f.reg.MustRegister(o.duration)
	for k, fam := range kindFamilies {
		o.names[k] = map[string]bool{}
		o.calls[k] = f.counterVec(fam.calls,
			"Downstream "+fam.what+" answered, by route, "+fam.label+" and outcome (as mcpgw_requests_total); at most admin.max_metric_names "+fam.label+" names, the rest as \"other\".",
			"route", fam.label, "outcome")
		o.callDur[k] = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: fam.duration,
			Help:    "Duration of downstream " + fam.what + ", by route and " + fam.label + ".",
			Buckets: durationBuckets,
		}, []string{"route", fam.label})
		f.reg.MustRegister(o.callDur[k])
	}
	o.overflow = f.counterVec("metric_names_overflow_total",
		"Requests counted under the name \"other\" in the per-name metrics because admin.max_metric_names names of their kind (tool, prompt, resource) already have series.",
		"kind")
	for k := range numKinds {
		o.overOf[k] = o.overflow.WithLabelValues(kindNames[k])
	}
	return o
}

// PerName reports whether requests of method are counted by name (Target).
func PerName(method string) bool { return mcp.Method(method).PerName }

// RequestDone counts one answered downstream request: its outcome in
// mcpgw_requests_total and its latency in mcpgw_request_duration_seconds.
func (m *Metrics) RequestDone(route, method string, o Outcome, d time.Duration) {
	if m == nil {
		return
	}
	m.RequestOutcome(route, method, o)
	mi := methodIdx(method)
	r, ok := m.ops.routes.Load(route)
	if !ok {
		r, _ = m.ops.routes.LoadOrStore(route, &opsRoute{durations: make([]lazy[prometheus.Observer], len(Methods))})
	}
	r.(*opsRoute).durations[mi].get(func() prometheus.Observer {
		return m.ops.duration.WithLabelValues(route, Methods[mi])
	}).Observe(d.Seconds())
}

// Target counts one tools/call, prompts/get or resources/read by what it
// was about: name is the tool or prompt name or the resource URI as the
// client sent it.
func (m *Metrics) Target(route string, kind mcp.Kind, name string, o Outcome, d time.Duration) {
	if m == nil || o < 0 || o >= numOutcomes {
		return
	}
	k := kindTool
	switch kind {
	case mcp.KindTool:
	case mcp.KindPrompt:
		k = kindPrompt
	case mcp.KindResource:
		k = kindResource
		name = resourceLabel(name)
	default:
		return
	}
	s := m.ops.target(k, route, name, o)
	s.outcomes[o].get(func() prometheus.Counter {
		return m.ops.calls[k].WithLabelValues(route, s.label, outcomeNames[o])
	}).Inc()
	s.duration.Observe(d.Seconds())
}

// target finds the series of (kind, route, name), admitting name when there
// is room and the outcome shows it is real; else the "other" series. Once
// the bound is reached, the common paths take only the read lock.
func (o *opsMetrics) target(k int, route, name string, outcome Outcome) *targetSeries {
	if len(name) > maxNameLen {
		name = name[:maxNameLen]
	}
	real := outcome == OutcomeOK || outcome == OutcomeError || outcome == OutcomeTimeout || outcome == OutcomeUnavailable
	key := targetKey{k, route, name}
	other := targetKey{k, route, OtherName}
	o.mu.RLock()
	s := o.series[key]
	admit := s == nil && name != OtherName && (o.names[k][name] || (real && len(o.names[k]) < o.max))
	if s == nil && !admit {
		s = o.series[other]
	}
	o.mu.RUnlock()
	if s != nil {
		if s.label != name {
			o.overOf[k].Inc()
		}
		return s
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if admit {
		if s = o.series[key]; s == nil {
			o.names[k][name] = true
			s = &targetSeries{label: name, duration: o.callDur[k].WithLabelValues(route, name)}
			o.series[key] = s
		}
		return s
	}
	o.overOf[k].Inc()
	if s = o.series[other]; s == nil {
		s = &targetSeries{label: OtherName, duration: o.callDur[k].WithLabelValues(route, OtherName)}
		o.series[other] = s
	}
	return s
}

// resourceLabel is a resource URI's scheme and authority: "file:///a/b"
// is "file://", "github://repos/x" is "github://repos", "urn:x:y" is "urn:".
func resourceLabel(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		if i := strings.IndexByte(uri, ':'); i > 0 {
			return uri[:i+1]
		}
		return OtherName
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:] // never a userinfo
	}
	return scheme + "://" + rest
}
