package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
)

// stats is the soak's accounting. Every request ends in exactly one of:
// refused (the gateway turned it away at the HTTP level, no JSON-RPC
// answer owed), abandoned (a 2026 client closed the stream to cancel it),
// or accepted — and an accepted request must be answered exactly once.
type stats struct {
	mu sync.Mutex

	sent, accepted, answered, unanswered int
	refused                              map[string]int // by cause
	abandoned                            int
	// Cancelled requests on sessions: the gateway may answer them (an
	// error) or, as the spec allows, not.
	cancelled, cancelledAnswered int
	crossed, duplicates          int
	badAnswers                   int // an answer of ours that is wrong (not another's)
	wellBehavedErrors            int
	resumed, resumedAnswered     int
	lateProgress                 int
	notifications                map[string]int

	byRevision map[string]*counts
	byLabel    map[string]*counts
	errCodes   map[int]int
	errSamples map[string]string // "<label> <code>" -> the first message

	sessionsOpened, sessionsLost int
	openFailures                 map[string]int

	problems []string // the first few, for the report
}

type counts struct {
	ok, errs, other int
	codes           map[int]int
}

func newStats() *stats {
	return &stats{refused: map[string]int{}, notifications: map[string]int{}, byRevision: map[string]*counts{},
		byLabel: map[string]*counts{}, errCodes: map[int]int{}, errSamples: map[string]string{}, openFailures: map[string]int{}}
}

const maxProblems = 25

func (st *stats) problem(format string, args ...any) {
	if len(st.problems) < maxProblems {
		st.problems = append(st.problems, fmt.Sprintf(format, args...))
	}
}

func (st *stats) crossedOn(where, what string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.crossed++
	st.problem("crossed on %s: %s", where, what)
}

func (st *stats) duplicate(what string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.duplicates++
	st.problem("duplicate: %s", what)
}

func (st *stats) late() {
	st.mu.Lock()
	st.lateProgress++
	st.mu.Unlock()
}

func (st *stats) note(method string) {
	st.mu.Lock()
	st.notifications[method]++
	st.mu.Unlock()
}

func (st *stats) opened(ok bool, rev, why string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if ok {
		st.sessionsOpened++
		return
	}
	st.openFailures[rev]++
	st.problem("session %s could not open: %s", rev, why)
}

func (st *stats) sessionLost(rev string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sessionsLost++
	st.problem("a %s session was lost (404 or its stream ended) while the gateway ran", rev)
}

func countsOf(m map[string]*counts, k string) *counts {
	c := m[k]
	if c == nil {
		c = &counts{}
		m[k] = c
	}
	return c
}

// record accounts for one request's reply.
func (st *stats) record(rev string, c *call, rep *reply) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sent++
	for _, x := range rep.crossed {
		st.crossed++
		st.problem("crossed (%s %s): %s", rev, c.label, x)
	}
	if rep.resumed > 0 {
		st.resumed++
		if rep.answers > 0 {
			st.resumedAnswered++
		}
	}
	switch {
	case rep.abandoned:
		st.abandoned++
		return
	case !rep.accepted:
		cause := fmt.Sprintf("HTTP %d", rep.status)
		if rep.status == 0 {
			cause = "transport"
		}
		st.refused[cause]++
		return
	}
	st.accepted++
	if rep.cancelled {
		st.cancelled++
	}
	if rep.answers > 1 {
		st.duplicates += rep.answers - 1
		st.problem("duplicate (%s %s): %d answers to one request", rev, c.label, rep.answers)
	}
	lc, rc := countsOf(st.byLabel, c.label), countsOf(st.byRevision, rev)
	if rep.answers == 0 {
		if rep.cancelled {
			return // allowed: no answer to a cancelled request
		}
		st.unanswered++
		lc.other++
		rc.other++
		st.problem("unanswered (%s %s): %v", rev, c.label, rep.err)
		return
	}
	if rep.cancelled {
		st.cancelledAnswered++
	}
	st.answered++
	if e := rep.resp.Error; e != nil {
		lc.errs++
		rc.errs++
		st.errCodes[e.Code]++
		if lc.codes == nil {
			lc.codes = map[int]int{}
		}
		lc.codes[e.Code]++
		if k := fmt.Sprintf("%s %d", c.label, e.Code); st.errSamples[k] == "" {
			st.errSamples[k] = e.Message
		}
		if c.wellBehaved && !rep.cancelled {
			st.wellBehavedErrors++
			st.problem("well-behaved call failed (%s %s): %d %s", rev, c.label, e.Code, e.Message)
		}
		return
	}
	if c.check != nil {
		if err := c.check(rep.resp.Result); err != nil {
			if errors.Is(err, errCrossed) {
				st.crossed++
				st.problem("crossed (%s %s): %v", rev, c.label, err)
			} else {
				st.badAnswers++
				st.problem("bad answer (%s %s): %v", rev, c.label, err)
			}
			lc.other++
			rc.other++
			return
		}
	}
	lc.ok++
	rc.ok++
}

// measure is one reading of the gateway's resources.
type measure struct {
	goroutines int
	rss        int64
	children   int
	groups     map[string]int // children by proc.group
	// upstreamOpen: calls the faulty HTTP upstream is still serving.
	upstreamOpen int
}

// bounds are the growth the soak tolerates between the baseline (idle,
// after a warm-up) and the end (idle, after the run).
type bounds struct {
	goroutines int
	rssBytes   int64
}

// verdict lists every invariant that failed; empty means the soak passed.
type verdict []string

func (st *stats) verdict(base, end measure, b bounds, extra []string) verdict {
	st.mu.Lock()
	defer st.mu.Unlock()
	var v verdict
	if st.accepted == 0 {
		v = append(v, "no request was accepted")
	}
	owed := st.accepted - (st.cancelled - st.cancelledAnswered)
	if st.answered != owed {
		v = append(v, fmt.Sprintf("accepted %d (of which %d cancelled and unanswered, allowed) but answered %d: %d unanswered", st.accepted, st.cancelled-st.cancelledAnswered, st.answered, st.unanswered))
	}
	if st.crossed != 0 {
		v = append(v, fmt.Sprintf("%d crossed messages", st.crossed))
	}
	if st.duplicates != 0 {
		v = append(v, fmt.Sprintf("%d duplicate answers", st.duplicates))
	}
	if st.badAnswers != 0 {
		v = append(v, fmt.Sprintf("%d wrong answers", st.badAnswers))
	}
	if st.wellBehavedErrors != 0 {
		v = append(v, fmt.Sprintf("%d calls to the well-behaved upstream failed", st.wellBehavedErrors))
	}
	if st.sessionsLost != 0 {
		v = append(v, fmt.Sprintf("%d sessions lost", st.sessionsLost))
	}
	if n := sum(st.openFailures); n != 0 {
		v = append(v, fmt.Sprintf("%d sessions could not be opened", n))
	}
	if g := end.goroutines - base.goroutines; g > b.goroutines {
		v = append(v, fmt.Sprintf("gateway goroutines grew by %d (%d -> %d), bound %d", g, base.goroutines, end.goroutines, b.goroutines))
	}
	if r := end.rss - base.rss; r > b.rssBytes {
		v = append(v, fmt.Sprintf("gateway RSS grew by %s (%s -> %s), bound %s", mib(r), mib(base.rss), mib(end.rss), mib(b.rssBytes)))
	}
	return append(v, extra...)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func fmtMap[K int | string](m map[K]int) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%v: %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// print writes the request half of the summary.
func (st *stats) print(w io.Writer, verbose bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	fmt.Fprintf(w, "requests     sent %d, accepted %d, answered %d, unanswered %d\n", st.sent, st.accepted, st.answered, st.unanswered)
	fmt.Fprintf(w, "             crossed %d, duplicates %d, wrong answers %d, well-behaved upstream errors %d\n", st.crossed, st.duplicates, st.badAnswers, st.wellBehavedErrors)
	fmt.Fprintf(w, "             refused (no answer owed) %d: %s\n", sum(st.refused), fmtMap(st.refused))
	fmt.Fprintf(w, "cancelled    on sessions %d (answered %d, not answered %d); 2026 streams closed %d\n", st.cancelled, st.cancelledAnswered, st.cancelled-st.cancelledAnswered, st.abandoned)
	fmt.Fprintf(w, "resumed      %d streams resumed with Last-Event-ID, %d of them answered; late progress %d\n", st.resumed, st.resumedAnswered, st.lateProgress)
	fmt.Fprintf(w, "sessions     opened %d, lost %d, failed to open %d\n", st.sessionsOpened, st.sessionsLost, sum(st.openFailures))
	fmt.Fprintf(w, "by revision  (ok/error/other)\n")
	for _, k := range slices.Sorted(maps.Keys(st.byRevision)) {
		c := st.byRevision[k]
		fmt.Fprintf(w, "             %-11s %7d %6d %4d\n", k, c.ok, c.errs, c.other)
	}
	fmt.Fprintf(w, "by call      (ok/error/other)\n")
	for _, k := range slices.Sorted(maps.Keys(st.byLabel)) {
		c := st.byLabel[k]
		codes := ""
		if len(c.codes) > 0 {
			codes = "  " + fmtMap(c.codes)
		}
		fmt.Fprintf(w, "             %-22s %7d %6d %4d%s\n", k, c.ok, c.errs, c.other, codes)
	}
	fmt.Fprintf(w, "error codes  %s\n", fmtMap(st.errCodes))
	fmt.Fprintf(w, "notes        %s\n", fmtMap(st.notifications))
	if verbose {
		fmt.Fprintf(w, "error samples (the first message of each call and code)\n")
		for _, k := range slices.Sorted(maps.Keys(st.errSamples)) {
			fmt.Fprintf(w, "             %s: %.160s\n", k, st.errSamples[k])
		}
	}
	if len(st.problems) > 0 {
		fmt.Fprintf(w, "problems (first %d):\n", len(st.problems))
		for _, p := range st.problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
	}
}
