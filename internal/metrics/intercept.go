package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// interceptMetrics are the interceptors' (internal/intercept): decisions
// by interceptor, phase and outcome, their latency, and the failures of
// external interceptor services.
type interceptMetrics struct {
	decisions *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	failures  *prometheus.CounterVec
}

func newInterceptMetrics(reg prometheus.Registerer) interceptMetrics {
	f := factory{reg}
	im := interceptMetrics{
		decisions: f.counterVec("interceptor_decisions_total",
			"Interceptor decisions, by interceptor, phase (request, result, list) and outcome (allow, modify, deny, flag, hide, fail_closed, fail_open).",
			"interceptor", "phase", "outcome"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "interceptor_duration_seconds",
			Help:    "Time an interceptor took to judge one member, by interceptor and phase.",
			Buckets: []float64{.00001, .0001, .001, .005, .01, .05, .1, .5, 1, 2.5, 5},
		}, []string{"interceptor", "phase"}),
		failures: f.counterVec("interceptor_failures_total",
			"External interceptor calls that failed (the fail mode decided), by interceptor and phase.",
			"interceptor", "phase"),
	}
	reg.MustRegister(im.latency)
	return im
}

// InterceptDecision counts one interceptor decision.
func (m *Metrics) InterceptDecision(name, phase, outcome string) {
	if m != nil {
		m.intercept.decisions.WithLabelValues(name, phase, outcome).Inc()
	}
}

// InterceptLatency records how long one interceptor took.
func (m *Metrics) InterceptLatency(name, phase string, d time.Duration) {
	if m != nil {
		m.intercept.latency.WithLabelValues(name, phase).Observe(d.Seconds())
	}
}

// InterceptFailure counts an external interceptor call that failed.
func (m *Metrics) InterceptFailure(name, phase string) {
	if m != nil {
		m.intercept.failures.WithLabelValues(name, phase).Inc()
	}
}
