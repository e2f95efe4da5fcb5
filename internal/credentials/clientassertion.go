package credentials

// The gateway's own upstream token without a client secret, and bound to
// a key (config upstreams.NAME.oauth):
//
//   - private_key_file: the client-credentials grant, the client
//     authenticating with a JWT signed by its key (private_key_jwt, RFC
//     7523 section 2.2); the algorithm is the first of the authorization
//     server's token_endpoint_auth_signing_alg_values_supported the key
//     makes; the file is read again when it changes.
//   - assertion_file: the JWT bearer grant (RFC 7523 section 2.1) with the
//     gateway's workload identity token (a Kubernetes projected
//     service-account token, a SPIFFE JWT-SVID), read for every token
//     request so a rotated token is used as soon as it is written.
//   - dpop: proofs of a key of the gateway's own on the token requests and
//     on every request to the upstream (RFC 9449); the token is presented
//     as "Authorization: DPoP".
//
// Each token request goes through oauthclient.PostToken, the same as the
// per-user client's.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
)

// GrantTypeJWTBearer is the JWT bearer grant (RFC 7523 section 2.1).
const GrantTypeJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// maxAssertionBytes bounds a workload identity token file.
const maxAssertionBytes = 64 << 10

// grantType is the grant an upstream's oauth: asks for tokens with.
func grantType(cfg *config.UpstreamOAuth) string {
	if cfg.AssertionFile != "" {
		return GrantTypeJWTBearer
	}
	return "client_credentials"
}

// usesJOSE reports whether the token requests are made here rather than
// by golang.org/x/oauth2 (which has no client assertions nor DPoP).
func usesJOSE(cfg *config.UpstreamOAuth) bool {
	return cfg.PrivateKeyFile != "" || cfg.AssertionFile != "" || cfg.DPoP
}

// joseToken asks g's token endpoint for a token as the config says (see
// the file comment).
func (f *tokenFetcher) joseToken(g grant, scopes []string) (*oauth2.Token, error) {
	form := url.Values{"grant_type": {grantType(f.cfg)}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	if g.resource != "" {
		form.Set("resource", g.resource) // RFC 8707
	}
	p := oauthclient.TokenPost{Endpoint: g.tokenURL, ClientID: f.cfg.ClientID, Form: form, DPoP: f.dpop}
	switch {
	case f.cfg.AssertionFile != "":
		a, err := f.readFile(f.cfg.AssertionFile)
		if err != nil {
			return nil, f.fail(g.tokenURL, "cannot read oauth.assertion_file: %v", err)
		}
		assertion := strings.TrimSpace(string(a))
		switch {
		case assertion == "":
			return nil, f.fail(g.tokenURL, "oauth.assertion_file %s is empty", f.cfg.AssertionFile)
		case len(assertion) > maxAssertionBytes:
			return nil, f.fail(g.tokenURL, "oauth.assertion_file %s holds more than %d bytes, which is no workload identity token", f.cfg.AssertionFile, maxAssertionBytes)
		}
		form.Set("assertion", assertion)
		p.AuthMethod = oauthclient.AuthMethodNone // the assertion is who the gateway is
	case f.key != nil:
		aud := g.issuer
		if aud == "" {
			aud = g.tokenURL // token_url configured: no issuer known (RFC 7523 section 3 allows either)
		}
		p.AuthMethod = oauthclient.AuthMethodPrivateKeyJWT
		p.Assertion = func() (string, error) {
			return f.key.ClientAssertion(f.cfg.ClientID, aud, g.signingAlgs, f.now())
		}
	default:
		secret, err := f.secret(g.tokenURL)
		if err != nil {
			return nil, err
		}
		p.Secret = secret
		p.AuthMethod = oauthclient.AuthMethodBasic
		if g.style == oauth2.AuthStyleInParams {
			p.AuthMethod = oauthclient.AuthMethodPost
		}
	}
	ctx, cancel := context.WithTimeout(f.ctx, tokenFetchTimeout)
	defer cancel()
	start := f.now()
	a, err := oauthclient.PostToken(ctx, f.client, p)
	if err != nil {
		return nil, f.fail(g.tokenURL, "%v", err)
	}
	if a.Status != http.StatusOK {
		cause := fmt.Sprintf("the token endpoint answered HTTP %d", a.Status)
		if a.Code != "" {
			cause += " " + a.Code
			if a.Description != "" {
				cause += " (" + a.Description + ")"
			}
		}
		return nil, f.fail(g.tokenURL, "%s", cause)
	}
	switch {
	case a.NotJSON != nil:
		return nil, f.fail(g.tokenURL, "the token answer is %v", a.NotJSON)
	case a.AccessToken == "":
		return nil, f.fail(g.tokenURL, "the token answer has no access_token")
	case f.dpop != nil && !strings.EqualFold(a.TokenType, oauthclient.TokenTypeDPoP):
		return nil, f.fail(g.tokenURL, "the token endpoint issued a %q token, not the DPoP-bound one asked for (oauth.dpop); remove oauth.dpop if the authorization server does not support DPoP", a.TokenType)
	case f.dpop == nil && a.TokenType != "" && !strings.EqualFold(a.TokenType, "bearer"):
		return nil, f.fail(g.tokenURL, "the token endpoint issued a %q token, but mcpgw sends only Bearer tokens here (set oauth.dpop for DPoP-bound ones)", a.TokenType)
	}
	tok := &oauth2.Token{AccessToken: a.AccessToken, TokenType: a.TokenType}
	if secs, ok := a.Seconds(); ok {
		tok.Expiry = useUntil(start, start.Add(time.Duration(secs)*time.Second))
	}
	f.mu.Lock()
	f.last = tok.AccessToken
	f.mu.Unlock()
	return tok, nil
}
