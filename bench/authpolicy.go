package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpgw/mcpgw/internal/policy/policytest"
)

// Scenario 4 (auth): the small tools/call as 2026-07-28 requests at c=1,
// through mcpgw as in scenario 1 and through a second mcpgw that verifies
// a JWT (ES256, keys from a local JWKS) and judges every call by a
// 1,000-rule policy whose rules all carry CEL conditions: what
// authentication and policy add (issue 18: ≤ 25 µs at p50).

// policyRules is the number of rules of the scenario's policy.
const policyRules = 1000

// scenarioPolicy is the scenario's policy: section, every rule with a CEL
// condition; rule 500 grants team500 the tools of upstream st (st__*).
func scenarioPolicy() string {
	return policytest.Large{Rules: policyRules, When: true, Grant: 500, GrantPrefix: "st__"}.YAML()
}

// issuer is a local token issuer: an ES256 key and its JWKS on 127.0.0.1.
type issuer struct {
	url string
	key *ecdsa.PrivateKey
	srv *http.Server
}

func newIssuer() (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "bench", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	is := &issuer{url: "http://" + ln.Addr().String(), key: key}
	is.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	})}
	go func() { _ = is.srv.Serve(ln) }()
	return is, nil
}

func (is *issuer) close() { _ = is.srv.Close() }

// token is a JWT for sub in groups, for audience aud, valid for an hour.
func (is *issuer) token(sub, aud string, groups []string) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "bench"))
	if err != nil {
		return "", err
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": is.url, "aud": aud, "sub": sub, "groups": groups, "tenant": "acme",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	jws, err := signer.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

func (b *bench) authPolicy(ctx context.Context) error {
	up, err := b.start("upstream", roleUpstream, "-big", "1024")
	if err != nil {
		return err
	}
	b.upstream = up
	is, err := newIssuer()
	if err != nil {
		return err
	}
	defer is.close()
	const aud = "mcpgw-bench"
	tok, err := is.token("alice", aud, []string{"team500", "team7"})
	if err != nil {
		return err
	}
	ups := fmt.Sprintf("upstreams:\n  st:\n    url: %s/stateless\nroutes:\n  - path: /mcp\n", up.mcpURL)
	plainCfg, err := b.writeConfig("auth-plain.yaml", "listen: 127.0.0.1:0\n"+ups)
	if err != nil {
		return err
	}
	authBlock := fmt.Sprintf("listen: 127.0.0.1:0\npublic_url: http://127.0.0.1\nauth:\n  oidc:\n    issuer: %s\n    jwks_url: %s/jwks\n    audience: %s\n    algorithms: [ES256]\n%s", is.url, is.url, aud, ups)
	jwtCfg, err := b.writeConfig("auth-jwt.yaml", authBlock+"policy: {default: allow}\n") // auth: alone denies by default
	if err != nil {
		return err
	}
	authCfg, err := b.writeConfig("auth-policy.yaml", authBlock+scenarioPolicy())
	if err != nil {
		return err
	}
	plain, err := b.start("mcpgw", roleGateway, "-config", plainCfg)
	if err != nil {
		return err
	}
	jwtOnly, err := b.start("mcpgw-jwt", roleGateway, "-config", jwtCfg)
	if err != nil {
		return err
	}
	guarded, err := b.start("mcpgw-auth", roleGateway, "-config", authCfg)
	if err != nil {
		return err
	}
	// The middle row splits what the JWT adds from what the policy adds.
	eps := []endpoint{
		{name: "mcpgw", url: plain.mcpURL + "/mcp", tool: "st__echo", middle: plain},
		{name: "mcpgw + JWT", url: jwtOnly.mcpURL + "/mcp", tool: "st__echo", middle: jwtOnly},
		{name: fmt.Sprintf("mcpgw + JWT + %d-rule CEL policy", policyRules), url: guarded.mcpURL + "/mcp", tool: "st__echo", middle: guarded},
	}
	bearer := map[string]string{eps[1].name: tok, eps[2].name: tok}
	mk := func(ep endpoint, dur time.Duration) load {
		return load{conc: 1, tool: ep.tool, args: `{"text":"hello"}`, want: []byte(`hello`), dur: dur, stateless: true, bearer: bearer[ep.name]}
	}
	fmt.Fprintf(b.out, "\n## tools/call with JWT auth and a %d-rule CEL policy (stateless requests, c=1), %d × %s, the rows' calls interleaved\n\n", policyRules, b.o.reps, b.o.dur)
	fmt.Fprintln(b.out, "| target | calls/s | p50 | p90 | p99 | added p50 | CPU/call | allocs/call | errors |")
	fmt.Fprintln(b.out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	rows := make([]stats, len(eps))
	for _, ep := range eps { // warm-up: JWKS fetched, connections made
		var st stats
		if err := b.runOnce(ctx, ep, mk(ep, 300*time.Millisecond), &st, ""); err != nil {
			return err
		}
		if st.errs > 0 {
			return fmt.Errorf("%s: warm-up failed: %s", ep.name, st.errMsg)
		}
	}
	urls, loads := make([]string, len(eps)), make([]load, len(eps))
	for i, ep := range eps {
		urls[i], loads[i] = ep.url, mk(ep, b.o.dur)
	}
	for rep := range b.o.reps {
		before := make([]procSample, len(eps))
		for i, ep := range eps {
			if before[i], err = ep.middle.sample(false); err != nil {
				return err
			}
		}
		var wg sync.WaitGroup
		if b.o.profileDir != "" {
			for i, ep := range eps {
				path := filepath.Join(b.o.profileDir, fmt.Sprintf("mcpgw-cpu-auth-%d-r%d.pprof", i, rep))
				secs := max(int(b.o.dur.Seconds()), 1)
				wg.Go(func() { fetch(ep.middle.statsURL+fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), path) })
			}
		}
		res := b.c.runInterleaved(ctx, urls, loads, b.o.dur)
		wg.Wait()
		for i, ep := range eps {
			after, err := ep.middle.sample(false)
			if err != nil {
				return err
			}
			rows[i].addMiddle(res[i], before[i], after)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if b.o.profileDir != "" {
		for i, ep := range eps { // mcpgw-allocs-auth-1 less -0: what auth and policy allocate
			fetch(ep.middle.statsURL+"/debug/pprof/allocs", filepath.Join(b.o.profileDir, fmt.Sprintf("mcpgw-allocs-auth-%d.pprof", i)))
		}
	}
	paired := pairedAdded(rows)
	var base time.Duration
	var baseLat []time.Duration
	for i, ep := range eps {
		st := &rows[i]
		lat := sortDurations(st.lat)
		p50 := pct(lat, 50)
		added := "—"
		if i == 0 {
			base, baseLat = p50, lat
		} else {
			added = addedDur(p50-base, addedHalfWidth(lat, baseLat))
			if paired != nil {
				added += fmt.Sprintf(" (paired %s)", addedDur(pct(paired[i], 50), medianHalfWidth(paired[i])))
			}
		}
		tput, allocs := 0.0, "—"
		if st.wall > 0 {
			tput = float64(st.calls) / st.wall.Seconds()
		}
		if st.calls > 0 {
			allocs = fmt.Sprint(st.mallocs / uint64(st.calls))
		}
		errs := fmt.Sprint(st.errs)
		if st.errs > 0 {
			errs += " (" + strings.ReplaceAll(st.errMsg, "|", "/") + ")"
		}
		fmt.Fprintf(b.out, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", ep.name, tput, fmtDur(p50), fmtDur(pct(lat, 90)), fmtDur(pct(lat, 99)), added, st.perCall(st.cpu), allocs, errs)
	}
	return nil
}

// pairedAdded is, for each row after the first, its calls' latencies less
// the first row's call of the same round, sorted: calls made one after
// the other share the host's state of the moment, which a difference of
// two rows' medians does not cancel. Nil when the rows' calls do not
// pair up (an error dropped one).
func pairedAdded(rows []stats) [][]time.Duration {
	n := len(rows[0].lat)
	for _, r := range rows {
		if len(r.lat) != n || r.errs > 0 {
			return nil
		}
	}
	out := make([][]time.Duration, len(rows))
	for i := 1; i < len(rows); i++ {
		d := make([]time.Duration, n)
		for k := range d {
			d[k] = rows[i].lat[k] - rows[0].lat[k]
		}
		out[i] = sortDurations(d)
	}
	return out
}
