package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// UpstreamIDJAG makes a token exchange Enterprise-Managed Authorization
// (the MCP ext-auth extension, SEP-990): the token asked of the enterprise
// IdP (token_exchange's endpoint) is an Identity Assertion JWT
// Authorization Grant (ID-JAG) for the upstream's authorization server,
// which the gateway then presents there with the JWT bearer grant (RFC
// 7523) for the upstream's access token. The user is never sent to a
// consent page: the enterprise's IdP decides.
type UpstreamIDJAG struct {
	// Issuer pins the upstream's authorization server (https, or http on
	// loopback); Discover takes it from the upstream's protected-resource
	// metadata. Exactly one is set. Its issuer is the ID-JAG's audience.
	Issuer   string `yaml:"issuer"`
	Discover bool   `yaml:"discover"`
	// ClientID and ClientSecret (use ${ENV_VAR}) or ClientSecretFile: the
	// gateway's client at the upstream's authorization server.
	ClientID         string `yaml:"client_id"`
	ClientSecret     string `yaml:"client_secret"`
	ClientSecretFile string `yaml:"client_secret_file"`
	// AuthMethod: client_secret_basic (default) or client_secret_post.
	AuthMethod string `yaml:"auth_method"`
	// Scopes asked of the upstream's authorization server.
	Scopes []string `yaml:"scopes"`
	// AllowAddresses lists the loopback, private or link-local addresses
	// that URLs the upstream names with discover may lead to.
	AllowAddresses []string `yaml:"allow_addresses"`
}

// TokenTypeIDJAG is the ID-JAG token type (ext-auth).
const TokenTypeIDJAG = "urn:ietf:params:oauth:token-type:id-jag"

// idJAGDefaults: an ID-JAG is asked for with the caller's identity
// assertion (an ID token) unless the config says otherwise.
func idJAGDefaults(tp string, te *UpstreamTokenExchange, d *strictyaml.Decoder) {
	if te.IDJAG == nil {
		return
	}
	if !d.Set(strictyaml.JoinPath(tp, "requested_token_type")) {
		te.RequestedTokenType = TokenTypeIDJAG
	}
	if !d.Set(strictyaml.JoinPath(tp, "subject_token_type")) {
		te.SubjectTokenType = TokenTypeIDToken
	}
	if !d.Set(strictyaml.JoinPath(strictyaml.JoinPath(tp, "id_jag"), "auth_method")) {
		te.IDJAG.AuthMethod = AuthMethodBasic
	}
}

// upstreamIDJAG validates token_exchange.id_jag at p.
func (v *validator) upstreamIDJAG(p string, te *UpstreamTokenExchange) {
	j := te.IDJAG
	if te.RequestedTokenType != TokenTypeIDJAG {
		v.add(strictyaml.JoinPath(p, "requested_token_type"), "with id_jag the IdP is asked for an ID-JAG; use "+TokenTypeIDJAG+" or remove requested_token_type")
	}
	jp := strictyaml.JoinPath(p, "id_jag")
	switch countSet(j.Issuer != "", j.Discover) {
	case 0:
		v.add(jp, "neither issuer nor discover is set; set issuer (the upstream's authorization server, the ID-JAG's audience) or discover: true (the one its protected-resource metadata names)")
	case 2:
		v.add(jp, "both issuer and discover are set; keep one")
	}
	if j.Issuer != "" {
		v.issuerURL(strictyaml.JoinPath(jp, "issuer"), j.Issuer)
	}
	if strings.TrimSpace(j.ClientID) == "" {
		v.add(jp, "client_id is not set; give the client id the upstream's authorization server registered for the gateway")
	}
	v.clientSecret(jp, j.ClientSecret, j.ClientSecretFile, true, "the gateway authenticates to the upstream's authorization server as a confidential client")
	switch j.AuthMethod {
	case "", AuthMethodBasic, AuthMethodPost:
	default:
		v.add(strictyaml.JoinPath(jp, "auth_method"), fmt.Sprintf("%q is not a client authentication method; use %s or %s", j.AuthMethod, AuthMethodBasic, AuthMethodPost))
	}
	v.scopes(strictyaml.JoinPath(jp, "scopes"), j.Scopes)
	v.allowAddresses(strictyaml.JoinPath(jp, "allow_addresses"), j.AllowAddresses)
}

type idJAGPlain UpstreamIDJAG

func (j UpstreamIDJAG) redacted() idJAGPlain {
	c := idJAGPlain(j)
	c.ClientSecret = redactString(j.ClientSecret)
	return c
}

// MarshalJSON encodes the ID-JAG settings with the client secret redacted.
func (j UpstreamIDJAG) MarshalJSON() ([]byte, error) { return json.Marshal(j.redacted()) }

// String formats the ID-JAG settings with the client secret redacted.
func (j UpstreamIDJAG) String() string { return fmt.Sprintf("%+v", j.redacted()) }
