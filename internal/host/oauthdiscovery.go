package host

// OAuth discovery for an upstream's client-credentials token
// (oauth.issuer, oauth.discover): the upstream's WWW-Authenticate
// challenge, its protected resource metadata (RFC 9728) and the
// authorization server's metadata (RFC 8414, OpenID Connect discovery),
// each checked before anything is sent where it points. Documents are
// bounded in size and time; nothing is cached beyond one run's result.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/mcpgw/mcpgw/internal/config"
)

// maxMetadataBytes bounds one metadata document.
const maxMetadataBytes = 64 << 10

// challenge is what a Bearer WWW-Authenticate challenge says (RFC 6750
// section 3, RFC 9728 section 5.1).
type challenge struct {
	scopes           []string
	resourceMetadata string
	err              string
}

// parseChallenge reads the Bearer challenge among the WWW-Authenticate
// values (several challenges may share one value, comma-separated).
func parseChallenge(values []string) challenge {
	var ch challenge
	for _, v := range values {
		scheme := ""
		for i := 0; i < len(v); {
			for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == ',') {
				i++
			}
			j := i
			for j < len(v) && v[j] != ' ' && v[j] != '\t' && v[j] != ',' && v[j] != '=' {
				j++
			}
			name := v[i:j]
			k := j
			for k < len(v) && (v[k] == ' ' || v[k] == '\t') {
				k++
			}
			if k >= len(v) || v[k] != '=' {
				// A token without "=" starts a new challenge (or is a token68).
				if name != "" {
					scheme = name
				}
				i = k
				continue
			}
			k++
			for k < len(v) && (v[k] == ' ' || v[k] == '\t') {
				k++
			}
			value := ""
			if k < len(v) && v[k] == '"' {
				var b strings.Builder
				k++
				for k < len(v) && v[k] != '"' {
					if v[k] == '\\' && k+1 < len(v) {
						k++
					}
					b.WriteByte(v[k])
					k++
				}
				value, i = b.String(), k+1
			} else {
				e := k
				for e < len(v) && v[e] != ',' && v[e] != ' ' && v[e] != '\t' {
					e++
				}
				value, i = v[k:e], e
			}
			if !strings.EqualFold(scheme, "Bearer") {
				continue
			}
			switch strings.ToLower(name) {
			case "scope":
				ch.scopes = strings.Fields(value)
			case "resource_metadata":
				ch.resourceMetadata = value
			case "error":
				ch.err = value
			}
		}
	}
	return ch
}

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

// resourceMetadata is the part of RFC 9728 metadata the gateway reads.
type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// serverMetadata is the part of RFC 8414 metadata the gateway reads.
type serverMetadata struct {
	Issuer                   string   `json:"issuer"`
	TokenEndpoint            string   `json:"token_endpoint"`
	TokenEndpointAuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	GrantTypes               []string `json:"grant_types_supported"`
}

// run discovers the grant for a 401 challenge, and the scopes the
// protected resource lists.
func (d *discovery) run(ctx context.Context, ch challenge) (grant, []string, error) {
	prm, prmURL, err := d.resourceMetadata(ctx, ch)
	if err != nil {
		return grant{}, nil, err
	}
	issuer := d.cfg.Issuer
	switch {
	case issuer != "" && prm != nil && len(prm.AuthorizationServers) > 0 && !slices.Contains(prm.AuthorizationServers, issuer):
		return grant{}, nil, d.fail("the protected resource metadata at %s names authorization servers %q, not the configured oauth.issuer %q", prmURL, prm.AuthorizationServers, issuer)
	case issuer == "" && prm == nil:
		return grant{}, nil, d.fail("the upstream published no protected resource metadata (asked %s), so there is no authorization server to discover; set oauth.issuer or oauth.token_url", d.prmCandidates(ch))
	case issuer == "" && len(prm.AuthorizationServers) == 0:
		return grant{}, nil, d.fail("the protected resource metadata at %s names no authorization_servers; set oauth.issuer or oauth.token_url", prmURL)
	case issuer == "":
		issuer = prm.AuthorizationServers[0]
		if err := secureEndpoint(issuer); err != nil {
			return grant{}, nil, d.fail("the protected resource metadata at %s names authorization server %q, which %v", prmURL, issuer, err)
		}
	}
	as, asURL, err := d.serverMetadata(ctx, issuer)
	if err != nil {
		return grant{}, nil, err
	}
	g := grant{tokenURL: as.TokenEndpoint, resource: d.cfg.Resource}
	if g.style, err = d.style(as, asURL); err != nil {
		return grant{}, nil, err
	}
	if len(as.GrantTypes) > 0 && !slices.Contains(as.GrantTypes, "client_credentials") {
		d.log.Warn("the authorization server's metadata does not list client_credentials in grant_types_supported; asking for a token anyway",
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

// prmCandidates are where the protected resource metadata is looked for:
// the challenge's resource_metadata, else the RFC 9728 well-known URLs of
// the upstream's URL (with its path, then at the root).
func (d *discovery) prmCandidates(ch challenge) []string {
	if ch.resourceMetadata != "" {
		return []string{ch.resourceMetadata}
	}
	u, err := url.Parse(d.url)
	if err != nil {
		return nil
	}
	root := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource"
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		return []string{root + p, root}
	}
	return []string{root}
}

// resourceMetadata fetches and checks the upstream's protected resource
// metadata; nil (no error) when there is none at the well-known URLs.
func (d *discovery) resourceMetadata(ctx context.Context, ch challenge) (*resourceMetadata, string, error) {
	for _, at := range d.prmCandidates(ch) {
		if err := secureEndpoint(at); err != nil {
			return nil, at, d.fail("the upstream's resource_metadata %q %v", at, err)
		}
		var m resourceMetadata
		found, err := d.fetch(ctx, at, &m)
		if err != nil {
			return nil, at, err
		}
		if !found {
			if ch.resourceMetadata != "" {
				return nil, at, d.fail("the resource_metadata %s the upstream's challenge names is not there", at)
			}
			continue
		}
		if !resourceCovers(m.Resource, d.url) {
			return nil, at, d.fail("the protected resource metadata at %s is for resource %q, which is not the upstream %s; refusing to obtain a token for it", at, m.Resource, d.url)
		}
		return &m, at, nil
	}
	return nil, "", nil
}

// serverMetadata fetches the authorization server's metadata: RFC 8414 at
// /.well-known/oauth-authorization-server, then OpenID Connect discovery,
// with the issuer's path inserted after the well-known prefix (and, for
// OpenID Connect, also appended), and checks it names exactly issuer.
func (d *discovery) serverMetadata(ctx context.Context, issuer string) (*serverMetadata, string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, "", d.fail("authorization server %q is not a URL", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.Path, "/")
	candidates := []string{origin + "/.well-known/oauth-authorization-server" + path, origin + "/.well-known/openid-configuration" + path}
	if path != "" {
		candidates = append(candidates, origin+path+"/.well-known/openid-configuration")
	}
	for _, at := range candidates {
		var m serverMetadata
		found, err := d.fetch(ctx, at, &m)
		if err != nil {
			return nil, at, err
		}
		if !found {
			continue
		}
		// RFC 8414 section 3.3: a simple string comparison, no normalizing.
		if m.Issuer != issuer {
			return nil, at, d.fail("the authorization server metadata at %s names issuer %q, not %q, so it must not be used", at, m.Issuer, issuer)
		}
		if m.TokenEndpoint == "" {
			return nil, at, d.fail("the authorization server metadata at %s names no token_endpoint", at)
		}
		if err := secureEndpoint(m.TokenEndpoint); err != nil {
			return nil, at, d.fail("the token_endpoint %q in %s %v", m.TokenEndpoint, at, err)
		}
		return &m, at, nil
	}
	return nil, "", d.fail("found no authorization server metadata for %s (asked %s)", issuer, strings.Join(candidates, ", "))
}

// style is how to authenticate to the token endpoint: oauth.auth_method,
// else what the server accepts, client_secret_basic first (RFC 8414's
// default when it lists nothing).
func (d *discovery) style(m *serverMetadata, at string) (oauth2.AuthStyle, error) {
	if d.cfg.AuthMethod != "" {
		return authStyle(d.cfg.AuthMethod), nil
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

// fetch GETs one metadata document into v. It reports false for a 404 or
// 410 (not published there) and fails for anything else but a JSON 200.
func (d *discovery) fetch(ctx context.Context, at string, v any) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, tokenFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, at, nil)
	if err != nil {
		return false, d.fail("metadata URL %q: %v", at, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return false, d.fail("GET %s: %v", at, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, d.fail("GET %s answered HTTP %d", at, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	switch {
	case err != nil:
		return false, d.fail("GET %s: %v", at, err)
	case len(b) > maxMetadataBytes:
		return false, d.fail("the metadata at %s is larger than %d bytes", at, maxMetadataBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, d.fail("the metadata at %s is not a JSON object: %v", at, err)
	}
	return true, nil
}

// secureEndpoint accepts https URLs, and http ones on a loopback host
// (where config accepts them too).
func secureEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("is not an absolute http(s) URL")
	case u.Scheme == "http" && !config.IsLoopbackHost(u.Hostname()):
		return fmt.Errorf("is plain http on a host that is not loopback")
	}
	return nil
}

// resourceCovers reports whether a protected resource identifier names the
// upstream at upstreamURL: the same origin, and the upstream's path is the
// resource's path or below it (a server may publish one resource for
// several endpoints under it).
func resourceCovers(resource, upstreamURL string) bool {
	r, err := url.Parse(resource)
	if err != nil || resource == "" || r.Fragment != "" {
		return false
	}
	u, err := url.Parse(upstreamURL)
	if err != nil || !strings.EqualFold(r.Scheme, u.Scheme) || !strings.EqualFold(r.Host, u.Host) {
		return false
	}
	rp, up := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(u.Path, "/")
	return up == rp || strings.HasPrefix(up, rp+"/")
}
