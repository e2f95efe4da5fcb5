package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// DPoP tunes how the gateway, as the resource server, checks DPoP-bound
// access tokens (RFC 9449; internal/auth/dpop.go). They are accepted
// without it, with the defaults; a route's require_dpop refuses other
// tokens there.
type DPoP struct {
	// Algorithms are the JWS algorithms a proof may be signed with,
	// announced in the DPoP challenge's algs (default ES256, ES384, ES512,
	// RS256, PS256, EdDSA).
	Algorithms []string `yaml:"algorithms"`
	// ProofLifetime is how far a proof's iat may be from the gateway's
	// clock, either way (default 1m); a proof's jti is remembered for
	// twice that, so it cannot be replayed.
	ProofLifetime Duration `yaml:"proof_lifetime"`
	// MaxReplayEntries bounds the remembered proofs (default 100000); when
	// it is full of unexpired ones, proofs are refused (503) until some
	// expire, and mcpgw_auth_failures_total{reason="unavailable"} counts them.
	MaxReplayEntries int `yaml:"max_replay_entries"`
	// Nonce makes the gateway require its own nonces in proofs (RFC 9449
	// section 9): a proof without a current one is answered 401
	// use_dpop_nonce with a DPoP-Nonce header to retry with.
	Nonce bool `yaml:"nonce"`
}

// DPoP defaults.
const (
	DefaultDPoPProofLifetime    = time.Minute
	DefaultDPoPMaxReplayEntries = 100000
	// MaxDPoPProofLifetime keeps the replay window short.
	MaxDPoPProofLifetime = 10 * time.Minute
)

// DefaultDPoPAlgorithms are the proof algorithms accepted by default:
// asymmetric only (RFC 9449 section 4.2).
var DefaultDPoPAlgorithms = []string{"ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA"}

// dpopAlgorithms are the algorithms auth.dpop.algorithms may list.
var dpopAlgorithms = []string{"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}

func dpopDefaults(c *Config, d *strictyaml.Decoder) {
	if c.Auth == nil || c.Auth.DPoP == nil {
		return
	}
	dp := c.Auth.DPoP
	if !d.Set("auth.dpop.algorithms") {
		dp.Algorithms = slices.Clone(DefaultDPoPAlgorithms)
	}
	if !d.Set("auth.dpop.proof_lifetime") {
		dp.ProofLifetime = Duration(DefaultDPoPProofLifetime)
	}
	if !d.Set("auth.dpop.max_replay_entries") {
		dp.MaxReplayEntries = DefaultDPoPMaxReplayEntries
	}
}

func (v *validator) dpop() {
	a := v.cfg.Auth
	for i, r := range v.cfg.Routes {
		if r != nil && r.RequireDPoP && len(a.AllIssuers()) == 0 {
			v.add(fmt.Sprintf("routes[%d].require_dpop", i), "no token issuer is configured (auth.oidc or auth.issuers), so no DPoP-bound token could be accepted; configure one, or remove require_dpop")
		}
	}
	if a == nil || a.DPoP == nil {
		return
	}
	dp := a.DPoP
	if len(dp.Algorithms) == 0 {
		v.add("auth.dpop.algorithms", "is empty, so no proof could be accepted; list some of "+strings.Join(dpopAlgorithms, ", ")+", or remove it for the default")
	}
	for i, alg := range dp.Algorithms {
		if !slices.Contains(dpopAlgorithms, alg) {
			v.add(fmt.Sprintf("auth.dpop.algorithms[%d]", i), fmt.Sprintf("%q is not an asymmetric JWS algorithm mcpgw checks proofs with; use one of %s", alg, strings.Join(dpopAlgorithms, ", ")))
		}
	}
	if l := dp.ProofLifetime.D(); l <= 0 || l > MaxDPoPProofLifetime {
		v.add("auth.dpop.proof_lifetime", fmt.Sprintf("%s is out of range; give more than 0 and at most %s (default %s): it is how old (or early) a proof's iat may be", dp.ProofLifetime, MaxDPoPProofLifetime, DefaultDPoPProofLifetime))
	}
	if dp.MaxReplayEntries <= 0 {
		v.add("auth.dpop.max_replay_entries", fmt.Sprintf("%d must be positive (default %d): it bounds the proofs remembered against replay", dp.MaxReplayEntries, DefaultDPoPMaxReplayEntries))
	}
}

// DPoPSettings are auth.dpop with defaults for an absent section.
func (a *Auth) DPoPSettings() DPoP {
	if a != nil && a.DPoP != nil {
		return *a.DPoP
	}
	return DPoP{Algorithms: slices.Clone(DefaultDPoPAlgorithms), ProofLifetime: Duration(DefaultDPoPProofLifetime), MaxReplayEntries: DefaultDPoPMaxReplayEntries}
}
