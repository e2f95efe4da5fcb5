package credentials

// Enterprise-Managed Authorization (the MCP ext-auth extension, SEP-990;
// upstreams.NAME.auth.token_exchange.id_jag): the caller's identity
// assertion (their validated downstream token, an ID token from the
// enterprise IdP) is exchanged at the IdP (RFC 8693, token_exchange's
// endpoint) for an Identity Assertion JWT Authorization Grant — audience
// the upstream's authorization server, resource the upstream — and the
// ID-JAG is then presented to that authorization server with the JWT
// bearer grant (RFC 7523 section 2.1) for the upstream's access token. No
// consent page: the enterprise's IdP decides. The ID-JAG is used once and
// never cached; the access token is cached as any exchanged token is.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
	"github.com/mcpgw/mcpgw/internal/outbound"
)

// idJAGServer is the upstream's authorization server, found once.
type idJAGServer struct {
	mu       sync.Mutex
	issuer   string
	tokenURL string
	client   *http.Client // to it (and, with discover, to what the upstream names)
}

// idJAGClient is the HTTP client of an id_jag's discovery and JWT bearer
// grant: no redirects, and with discover no internal address but the
// upstream's own and id_jag.allow_addresses.
func idJAGClient(name, upstreamURL string, j *config.UpstreamIDJAG) *http.Client {
	key := "upstreams." + name + ".auth.token_exchange.id_jag.allow_addresses"
	g, err := outbound.NewGuard(j.AllowAddresses, key)
	if err != nil { // config validation refuses it; fail closed anyway
		g, _ = outbound.NewGuard(nil, key)
	}
	return outbound.Client(g.Trust(upstreamURL, j.Issuer), tokenFetchTimeout)
}

// server returns the upstream's authorization server: the pinned issuer's
// metadata, or the one the upstream's protected-resource metadata names.
func (s *exchangeSource) idJAGServer(ctx context.Context) (issuer, tokenURL string, err error) {
	j := s.jag
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.tokenURL != "" {
		return j.issuer, j.tokenURL, nil
	}
	d := &oauthclient.Discoverer{HTTP: j.client, Timeout: tokenFetchTimeout}
	issuer = s.cfg.IDJAG.Issuer
	if issuer == "" {
		prm, at, err := d.ProtectedResource(ctx, s.upURL, oauthclient.Challenge{})
		switch {
		case err != nil:
			return "", "", fmt.Errorf("discovering the upstream's authorization server: %v", err)
		case prm == nil || len(prm.AuthorizationServers) == 0:
			return "", "", fmt.Errorf("the upstream names no authorization server (protected resource metadata at %s); set id_jag.issuer", at)
		}
		issuer = prm.AuthorizationServers[0]
		if err := oauthclient.SecureEndpoint(issuer); err != nil {
			return "", "", fmt.Errorf("the upstream names authorization server %q, which %v", issuer, err)
		}
	}
	m, _, err := d.AuthorizationServer(ctx, issuer)
	if err != nil {
		return "", "", fmt.Errorf("the upstream's authorization server: %v", err)
	}
	if err := oauthclient.SecureEndpoint(m.TokenEndpoint); err != nil {
		return "", "", fmt.Errorf("the upstream's authorization server's token_endpoint %q %v", m.TokenEndpoint, err)
	}
	j.issuer, j.tokenURL = m.Issuer, m.TokenEndpoint
	return j.issuer, j.tokenURL, nil
}

// redeemIDJAG presents jag to the upstream's authorization server (the
// JWT bearer grant) and returns its access token and lifetime answer.
func (s *exchangeSource) redeemIDJAG(ctx context.Context, jag, tokenURL string) (*oauthclient.TokenAnswer, error) {
	j := s.cfg.IDJAG
	secret := j.ClientSecret
	if j.ClientSecretFile != "" {
		b, err := s.readFile(j.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read id_jag.client_secret_file: %v", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	method := oauthclient.AuthMethodBasic
	if j.AuthMethod == config.AuthMethodPost {
		method = oauthclient.AuthMethodPost
	}
	form := url.Values{"grant_type": {GrantTypeJWTBearer}, "assertion": {jag}}
	if len(j.Scopes) > 0 {
		form.Set("scope", strings.Join(j.Scopes, " "))
	}
	out, err := oauthclient.PostToken(ctx, s.jag.client, oauthclient.TokenPost{Endpoint: tokenURL, ClientID: j.ClientID, Secret: secret, AuthMethod: method, Form: form})
	if err != nil {
		return nil, fmt.Errorf("the upstream's authorization server (%s) is unreachable: %v", tokenURL, unwrapURLError(err))
	}
	switch {
	case out.Status != http.StatusOK && out.Code != "":
		d := ""
		if out.Description != "" {
			d = ": " + printable(out.Description)
		}
		return nil, fmt.Errorf("the upstream's authorization server (%s) refused the ID-JAG (HTTP %d): %s%s", tokenURL, out.Status, out.Code, d)
	case out.Status != http.StatusOK:
		return nil, fmt.Errorf("the upstream's authorization server (%s) answered HTTP %d", tokenURL, out.Status)
	case out.NotJSON != nil || out.AccessToken == "":
		return nil, fmt.Errorf("the upstream's authorization server (%s) answered no access_token", tokenURL)
	case !strings.EqualFold(out.TokenType, "bearer"):
		return nil, fmt.Errorf("the upstream's authorization server (%s) issued a %q token, but mcpgw sends only Bearer tokens here", tokenURL, printable(out.TokenType))
	}
	return out, nil
}
