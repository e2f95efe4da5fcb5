package peruser

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the per-user authorization series, shared by every
// upstream's Source (label upstream, from config; reason and outcome from
// fixed lists). A nil *Metrics records nothing.
type Metrics struct {
	tokens    *prometheus.GaugeVec
	flows     *prometheus.CounterVec
	refreshes *prometheus.CounterVec
	refusals  *prometheus.CounterVec
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		tokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "mcpgw", Name: "peruser_tokens",
			Help: "Principals holding a per-user token for the upstream (bounded by auth.per_user.max_tokens)."}, []string{"upstream"}),
		flows: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcpgw", Name: "peruser_authorizations_total",
			Help: "Per-user authorization flows by outcome: elicited (a link handed out), started (the start page redirected), completed (tokens stored), step_up (a link for more scopes after a 403 insufficient_scope), step_up_refused (none: the scopes were asked for already, or too many)."}, []string{"upstream", "outcome"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcpgw", Name: "peruser_refreshes_total",
			Help: "Per-user token refreshes by outcome: ok, invalid_grant (the token is dropped), error."}, []string{"upstream", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcpgw", Name: "peruser_refusals_total",
			Help: "Start and callback requests refused, by reason."}, []string{"upstream", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.tokens, m.flows, m.refreshes, m.refusals)
	}
	return m
}

// Refusal reasons (mcpgw_peruser_refusals_total{reason}).
const (
	reasonBadLink     = "bad_link"    // a start link that does not open (tampered, foreign)
	reasonExpired     = "expired"     // a link or state past its lifetime
	reasonReplay      = "replay"      // a link or state used before
	reasonBadState    = "bad_state"   // a state that does not open
	reasonCSRF        = "csrf"        // the cookie is missing or not the state's
	reasonDenied      = "denied"      // the authorization server answered error=
	reasonExchange    = "exchange"    // redeeming the code failed
	reasonStoreFull   = "store_full"  // max_tokens reached
	reasonBusy        = "busy"        // the memory of used links is full
	reasonUnavailable = "unavailable" // the store or the server could not be reached
	reasonOtherUser   = "other_user"  // the browser's gateway user is not the link's
)

func (m *Metrics) refused(upstream, reason string) {
	if m != nil {
		m.refusals.WithLabelValues(upstream, reason).Inc()
	}
}

func (m *Metrics) flow(upstream, outcome string) {
	if m != nil {
		m.flows.WithLabelValues(upstream, outcome).Inc()
	}
}

func (m *Metrics) refreshed(upstream, outcome string) {
	if m != nil {
		m.refreshes.WithLabelValues(upstream, outcome).Inc()
	}
}

func (m *Metrics) held(upstream string, n int) {
	if m != nil {
		m.tokens.WithLabelValues(upstream).Set(float64(n))
	}
}
