package metrics

import "github.com/prometheus/client_golang/prometheus"

// credentialSeries are the upstream-credential series: RFC 8693 exchanges
// by outcome, and each upstream's exchanged-token cache.
type credentialSeries struct {
	exchanges *prometheus.CounterVec
	entries   *prometheus.GaugeVec
	evictions *prometheus.CounterVec
}

// Exchange outcomes.
const (
	ExchangeOK      = "ok"      // a token was issued
	ExchangeRefused = "refused" // the authorization server answered an OAuth error
	ExchangeError   = "error"   // no usable answer (unreachable, malformed, not Bearer)
	// ExchangeRefusedRecently is a call answered with the refusal the
	// server gave the same subject token moments ago, without asking it.
	ExchangeRefusedRecently = "refused_recently"
)

func newCredentialSeries(f factory) *credentialSeries {
	return &credentialSeries{
		exchanges: f.counterVec("upstream_token_exchanges_total",
			"RFC 8693 token exchanges the gateway made for callers of an upstream (cache misses), by upstream and outcome (ok, refused, error; refused_recently: the refusal of the same subject token repeated from memory for 10 s, without asking).",
			"upstream", "outcome"),
		entries: f.gaugeVec("upstream_exchange_cache_entries",
			"Exchanged tokens cached for an upstream's callers (bounded by upstreams.NAME.auth.token_exchange.max_cached).", "upstream"),
		evictions: f.counterVec("upstream_exchange_cache_evictions_total",
			"Exchanged tokens dropped from a full cache before they expired (least recently used first), by upstream.", "upstream"),
	}
}

// TokenExchange counts one exchange at the authorization server.
func (m *Metrics) TokenExchange(upstream, outcome string) {
	if m == nil {
		return
	}
	m.cred.exchanges.WithLabelValues(upstream, outcome).Inc()
}

// ExchangeCache sets how many exchanged tokens an upstream's cache holds,
// and counts evicted ones.
func (m *Metrics) ExchangeCache(upstream string, entries, evicted int) {
	if m == nil {
		return
	}
	m.cred.entries.WithLabelValues(upstream).Set(float64(entries))
	if evicted > 0 {
		m.cred.evictions.WithLabelValues(upstream).Add(float64(evicted))
	}
}
