package main

// The identity scenarios, with the library's pieces rather than an
// authorization-code flow: auth/client-credentials-jwt (the
// client-credentials grant with a private_key_jwt assertion of
// oauthclient.KeyFile), auth/wif-jwt-bearer (the JWT bearer grant with the
// workload token), auth/enterprise-managed-authorization (an ID-JAG from
// the IdP by token exchange, then the JWT bearer grant), each through
// oauthclient.PostToken after oauthclient.Discoverer found the server; and
// auth/dpop, auth/dpop-nonce (the authorization-code flow with
// oauthclient.Config.DPoP, tokens presented with oauthclient.DPoPKey
// proofs).

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
)

const (
	grantJWTBearer     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeIDToken   = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeIDJAG     = "urn:ietf:params:oauth:token-type:id-jag"
)

// directGrant reports whether the scenario's token comes from a grant the
// probe makes itself (no user agent).
func (sc scenarioContext) directGrant(scenario string) bool {
	switch scenario {
	case "auth/client-credentials-jwt", "auth/wif-jwt-bearer", "auth/enterprise-managed-authorization":
		return true
	}
	return false
}

// grant obtains the scenario's token without a user agent.
func (p *probe) grant(ctx context.Context, challenge []string) error {
	d := &oauthclient.Discoverer{HTTP: p.hc}
	prm, at, err := d.ProtectedResource(ctx, p.url, oauthclient.ParseChallenge(challenge))
	if err != nil || prm == nil || len(prm.AuthorizationServers) == 0 {
		return fmt.Errorf("no authorization server named by the protected resource metadata (%s): %v", at, err)
	}
	as, _, err := d.AuthorizationServer(ctx, prm.AuthorizationServers[0])
	if err != nil {
		return err
	}
	resource := prm.Resource
	if resource == "" {
		resource = p.url
	}
	sc := p.sc
	post := oauthclient.TokenPost{Endpoint: as.TokenEndpoint, ClientID: sc.ClientID}
	switch p.scenario {
	case "auth/client-credentials-jwt":
		kf := filepath.Join(os.TempDir(), fmt.Sprintf("oauthprobe-key-%d.pem", os.Getpid()))
		if err := os.WriteFile(kf, []byte(sc.PrivateKeyPEM), 0o600); err != nil {
			return err
		}
		defer os.Remove(kf)
		key := &oauthclient.KeyFile{Path: kf}
		post.AuthMethod = oauthclient.AuthMethodPrivateKeyJWT
		post.Assertion = func() (string, error) {
			return key.ClientAssertion(sc.ClientID, as.Issuer, as.TokenEndpointAuthSigningAlgs, time.Now())
		}
		post.Form = url.Values{"grant_type": {"client_credentials"}, "resource": {resource}}
	case "auth/wif-jwt-bearer":
		post.AuthMethod = oauthclient.AuthMethodNone
		post.Form = url.Values{"grant_type": {grantJWTBearer}, "assertion": {sc.ValidJWT}, "resource": {resource}}
	case "auth/enterprise-managed-authorization":
		jag, err := oauthclient.PostToken(ctx, p.hc, oauthclient.TokenPost{
			Endpoint: sc.IDPTokenEndpoint, ClientID: sc.IDPClientID, AuthMethod: oauthclient.AuthMethodNone,
			Form: url.Values{
				"grant_type": {grantTokenExchange}, "subject_token": {sc.IDPIDToken}, "subject_token_type": {tokenTypeIDToken},
				"requested_token_type": {tokenTypeIDJAG}, "audience": {as.Issuer}, "resource": {resource},
			},
		})
		if err != nil {
			return err
		}
		if jag.Status != http.StatusOK || jag.IssuedTokenType != tokenTypeIDJAG {
			return fmt.Errorf("token exchange at the IdP: HTTP %d %s %s (issued %q)", jag.Status, jag.Code, jag.Description, jag.IssuedTokenType)
		}
		post.AuthMethod, post.Secret = oauthclient.AuthMethodBasic, sc.ClientSecret
		post.Form = url.Values{"grant_type": {grantJWTBearer}, "assertion": {jag.AccessToken}}
	}
	a, err := oauthclient.PostToken(ctx, p.hc, post)
	if err != nil {
		return err
	}
	if a.Status != http.StatusOK || a.AccessToken == "" {
		return fmt.Errorf("token request: HTTP %d %s %s", a.Status, a.Code, a.Description)
	}
	p.log.Printf("token from %s (%s)", as.TokenEndpoint, p.scenario)
	p.token = &oauthclient.Token{AccessToken: a.AccessToken}
	return nil
}

// present puts the token on req: DPoP with a proof of the probe's key, or
// Bearer.
func (p *probe) present(req *http.Request) error {
	if p.dpop == nil {
		req.Header.Set("Authorization", "Bearer "+p.token.AccessToken)
		return nil
	}
	proof, err := p.dpop.Proof(req.Method, req.URL.String(), p.token.AccessToken)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", oauthclient.TokenTypeDPoP+" "+p.token.AccessToken)
	req.Header.Set("DPoP", proof)
	return nil
}

// nonceRetry reports whether resp asks for a DPoP nonce the probe has not
// sent yet (remembering it): the request then goes once more.
func (p *probe) nonceRetry(resp *http.Response) bool {
	if p.dpop == nil {
		return false
	}
	fresh := p.dpop.SetNonce(p.url, resp.Header.Get("DPoP-Nonce"))
	return fresh && resp.StatusCode == http.StatusUnauthorized && oauthclient.IsNonceChallenge(resp.Header.Values("WWW-Authenticate"))
}
