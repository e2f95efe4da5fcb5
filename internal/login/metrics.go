package login

import "github.com/prometheus/client_golang/prometheus"

// loginMetrics are the login series; every method is a no-op on nil.
type loginMetrics struct {
	requests *prometheus.CounterVec
	refused  *prometheus.CounterVec
	entries  *prometheus.GaugeVec
}

func newLoginMetrics(reg prometheus.Registerer) *loginMetrics {
	if reg == nil {
		return nil
	}
	m := &loginMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcpgw", Name: "login_requests_total",
			Help: "Requests to the gateway's authorization server (login:), by endpoint and outcome (ok, refused, error)."}, []string{"endpoint", "outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcpgw", Name: "login_refusals_total",
			Help: "Requests the gateway's authorization server refused, by reason (e.g. max_clients, registration_rate, max_pending, max_grants, pkce, redirect_uri, code_replay, refresh_reuse, csrf, cross_site, client_metadata)."}, []string{"reason"}),
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "mcpgw", Name: "login_entries",
			Help: "What the gateway's authorization server keeps, by kind: clients (bounded by login.max_clients), metadata_clients, consents and families (login.max_grants), pending and codes (login.max_pending), registration_sources."}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.refused, m.entries} {
		if err := reg.Register(c); err != nil {
			if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
				switch c {
				case m.requests:
					m.requests = are.ExistingCollector.(*prometheus.CounterVec)
				case m.refused:
					m.refused = are.ExistingCollector.(*prometheus.CounterVec)
				case m.entries:
					m.entries = are.ExistingCollector.(*prometheus.GaugeVec)
				}
			}
		}
	}
	return m
}

func (m *loginMetrics) request(endpoint, outcome string) {
	if m != nil {
		m.requests.WithLabelValues(endpoint, outcome).Inc()
	}
}

func (m *loginMetrics) refusal(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

func (m *loginMetrics) set(kind string, n int) {
	if m != nil {
		m.entries.WithLabelValues(kind).Set(float64(n))
	}
}

// gauges refreshes the entry counts.
func (s *Server) gauges() {
	if s.met == nil {
		return
	}
	clients, consents, families := s.store.counts()
	s.mu.Lock()
	pending, codes, meta, regs := len(s.pending), len(s.codes), len(s.metaCache), len(s.regs)
	s.mu.Unlock()
	s.met.set("clients", clients)
	s.met.set("consents", consents)
	s.met.set("families", families)
	s.met.set("pending", pending)
	s.met.set("codes", codes)
	s.met.set("metadata_clients", meta)
	s.met.set("registration_sources", regs)
}
