package main

import (
	"context"
	"fmt"
	"time"
)

// The two-gateway scenarios (tls, intercept): the same small call through
// a baseline gateway and a variant in front of one upstream, alternating,
// each row's added p50 and CPU per call against the baseline (eps[0]).

// pairSessions opens one legacy session at each endpoint.
func (b *bench) pairSessions(ctx context.Context, eps []endpoint) (map[string][]string, error) {
	sessions := map[string][]string{}
	for _, ep := range eps {
		ids, err := b.openSessions(ctx, ep.url, 1, 1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ep.name, err)
		}
		sessions[ep.name] = ids
	}
	return sessions, nil
}

// pairCell warms every endpoint up, then measures them b.o.reps times,
// alternating (at c=1 the rows' calls interleaved on one worker).
func (b *bench) pairCell(ctx context.Context, scenario string, c int, eps []endpoint, mk func(endpoint, time.Duration) load) ([]stats, error) {
	rows := make([]stats, len(eps))
	warm := min(b.o.dur, max(300*time.Millisecond, time.Duration(c)*4*time.Millisecond))
	for _, ep := range eps {
		var st stats
		if err := b.runOnce(ctx, ep, mk(ep, warm), &st, ""); err != nil {
			return nil, err
		}
		if st.errs > 0 {
			return nil, fmt.Errorf("%s c=%d via %s: warm-up failed: %s", scenario, c, ep.name, st.errMsg)
		}
	}
	for rep := range b.o.reps {
		if c == 1 {
			loads := make([]load, len(eps))
			for i, ep := range eps {
				loads[i] = mk(ep, b.o.dur)
			}
			if err := b.interleaved(ctx, eps, loads, time.Duration(len(eps))*b.o.dur, rows, ""); err != nil {
				return nil, err
			}
			continue
		}
		for k := range eps {
			i := (k + rep) % len(eps)
			if err := b.runOnce(ctx, eps[i], mk(eps[i], b.o.dur), &rows[i], ""); err != nil {
				return nil, err
			}
		}
	}
	return rows, nil
}

// pairRatio is row's CPU per call over the baseline's ("—" without calls).
func pairRatio(row, base *stats) string {
	if base.calls == 0 || row.calls == 0 || base.cpu == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", (float64(row.cpu)/float64(row.calls))/(float64(base.cpu)/float64(base.calls)))
}
