package credentials

// OAuth discovery for an upstream's client-credentials token
// (oauth.issuer, oauth.discover): the upstream's WWW-Authenticate
// challenge, its protected resource metadata (RFC 9728) and the
// authorization server's metadata (RFC 8414, OpenID Connect discovery),
// each checked before anything is sent where it points. The parsing and
// the fetching are oauthclient's (shared with per-user authorization);
// this file decides what they mean for the gateway's own token. Nothing
// is cached beyond one run's result.

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials/oauthclient"
)

// discovery finds the token endpoint, the resource and the scopes an
// upstream offers.
type discovery struct {
	upstream string // its name, for errors
	url      string // its URL
	cfg      *config.UpstreamOAuth
	client   *http.Client
	log      *zap.Logger
}

// DiscoveryError is an OAuth discovery that could not be completed or
// whose answers were refused; it names the upstream and the document.
type DiscoveryError struct {
	Upstream string
	Cause    string
}

func (e *DiscoveryError) Error() string {
	return fmt.Sprintf("upstream %q: OAuth discovery failed: %s; check upstreams.%s.oauth, the upstream and its authorization server", e.Upstream, e.Cause, e.Upstream)
}

func (d *discovery) fail(format string, args ...any) error {
	return &DiscoveryError{Upstream: d.upstream, Cause: fmt.Sprintf(format, args...)}
}

// run discovers the grant for a 401 challenge, and the scopes the
// protected resource lists.
func (d *discovery) run(ctx context.Context, ch oauthclient.Challenge) (grant, []string, error) {
	if d.cfg.Issuer != "" && ch.ResourceMetadata != "" && originOf(ch.ResourceMetadata) != originOf(d.url) {
		// The authorization server is pinned: a metadata document the
		// upstream names elsewhere is not fetched (its well-known URLs
		// are, for the resource and scopes).
		d.log.Info("ignoring the upstream's resource_metadata on another origin: oauth.issuer is pinned", zap.String("resource_metadata", ch.ResourceMetadata))
		ch.ResourceMetadata = ""
	}
	prm, prmURL, err := d.resourceMetadata(ctx, ch)
	if err != nil {
		return grant{}, nil, err
	}
	issuer := d.cfg.Issuer
	switch {
	case issuer != "" && prm != nil && len(prm.AuthorizationServers) > 0 && !slices.Contains(prm.AuthorizationServers, issuer):
		return grant{}, nil, d.fail("the protected resource metadata at %s names authorization servers %q, not the configured oauth.issuer %q", prmURL, prm.AuthorizationServers, issuer)
	case issuer == "" && prm == nil:
		return grant{}, nil, d.fail("the upstream published no protected resource metadata (asked %s), so there is no authorization server to discover; set oauth.issuer or oauth.token_url", oauthclient.PRMCandidates(d.url, ch))
	case issuer == "" && len(prm.AuthorizationServers) == 0:
		return grant{}, nil, d.fail("the protected resource metadata at %s names no authorization_servers; set oauth.issuer or oauth.token_url", prmURL)
	case issuer == "":
		issuer = prm.AuthorizationServers[0]
		if err := oauthclient.SecureEndpoint(issuer); err != nil {
			return grant{}, nil, d.fail("the protected resource metadata at %s names authorization server %q, which %v", prmURL, issuer, err)
		}
	}
	as, asURL, err := d.serverMetadata(ctx, issuer)
	if err != nil {
		return grant{}, nil, err
	}
	g := grant{tokenURL: as.TokenEndpoint, resource: d.cfg.Resource, issuer: as.Issuer, signingAlgs: as.TokenEndpointAuthSigningAlgs}
	if g.style, err = d.style(as, asURL); err != nil {
		return grant{}, nil, err
	}
	if gt := grantType(d.cfg); len(as.GrantTypes) > 0 && !slices.Contains(as.GrantTypes, gt) {
		d.log.Warn("the authorization server's metadata does not list the grant in grant_types_supported; asking for a token anyway", zap.String("grant_type", gt),
			zap.String("metadata", asURL), zap.Strings("grant_types_supported", as.GrantTypes))
	}
	var offered []string
	if prm != nil {
		if g.resource == "" {
			g.resource = prm.Resource // exactly as published (RFC 9728, RFC 8707)
		}
		offered = prm.ScopesSupported
	}
	if g.resource == "" {
		g.resource = d.url
	}
	d.log.Info("upstream OAuth discovered", zap.String("token_endpoint", g.tokenURL), zap.String("resource", g.resource), zap.String("issuer", issuer))
	return g, offered, nil
}

// resourceMetadata fetches and checks the upstream's protected resource
// metadata (oauthclient.Discoverer); nil (no error) when there is none at
// the well-known URLs.
func (d *discovery) resourceMetadata(ctx context.Context, ch oauthclient.Challenge) (*oauthclient.ResourceMetadata, string, error) {
	m, at, err := d.discoverer().ProtectedResource(ctx, d.url, ch)
	if err != nil {
		return nil, at, d.fail("%v", err)
	}
	return m, at, nil
}

// serverMetadata fetches the authorization server's metadata and checks it
// names exactly issuer (oauthclient.Discoverer).
func (d *discovery) serverMetadata(ctx context.Context, issuer string) (*oauthclient.ServerMetadata, string, error) {
	m, at, err := d.discoverer().AuthorizationServer(ctx, issuer)
	if err != nil {
		return nil, at, d.fail("%v", err)
	}
	return m, at, nil
}

func (d *discovery) discoverer() *oauthclient.Discoverer {
	return &oauthclient.Discoverer{HTTP: d.client, Timeout: tokenFetchTimeout}
}

// style is how to authenticate to the token endpoint: oauth.auth_method,
// else what the server accepts, client_secret_basic first (RFC 8414's
// default when it lists nothing).
func (d *discovery) style(m *oauthclient.ServerMetadata, at string) (oauth2.AuthStyle, error) {
	if d.cfg.AuthMethod != "" {
		return authStyle(d.cfg.AuthMethod), nil
	}
	if d.cfg.PrivateKeyFile != "" || d.cfg.AssertionFile != "" {
		return 0, nil // no secret: the key or the assertion authenticates
	}
	switch methods := m.TokenEndpointAuthMethods; {
	case len(methods) == 0, slices.Contains(methods, config.AuthMethodBasic):
		return oauth2.AuthStyleInHeader, nil
	case slices.Contains(methods, config.AuthMethodPost):
		return oauth2.AuthStyleInParams, nil
	default:
		return 0, d.fail("the authorization server (%s) accepts only %q at its token endpoint; mcpgw authenticates with %s or %s", at, methods, config.AuthMethodBasic, config.AuthMethodPost)
	}
}
