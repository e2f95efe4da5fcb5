package oauthclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/config"
)

// MaxDocumentBytes bounds one metadata document, registration answer or
// token response.
const MaxDocumentBytes = 64 << 10

// DefaultTimeout bounds one request to a metadata, registration or token
// endpoint when the Discoverer (or Config) sets none.
const DefaultTimeout = 30 * time.Second

// ResourceMetadata is the part of RFC 9728 protected resource metadata the
// gateway reads.
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// ServerMetadata is the part of RFC 8414 authorization server metadata
// (or OpenID Connect discovery) the gateway reads.
type ServerMetadata struct {
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	RegistrationEndpoint          string   `json:"registration_endpoint"`
	ScopesSupported               []string `json:"scopes_supported"`
	GrantTypes                    []string `json:"grant_types_supported"`
	TokenEndpointAuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	TokenEndpointAuthSigningAlgs  []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	DPoPSigningAlgs               []string `json:"dpop_signing_alg_values_supported"`
	CodeChallengeMethods          []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocument      bool     `json:"client_id_metadata_document_supported"`
	AuthorizationResponseIssParam bool     `json:"authorization_response_iss_parameter_supported"`
}

// Discoverer fetches an upstream's protected resource metadata and its
// authorization server's metadata, each checked before anything is sent
// where it points. Documents are bounded in size (MaxDocumentBytes) and
// time (Timeout); nothing is cached.
type Discoverer struct {
	HTTP    *http.Client
	Timeout time.Duration // per document; DefaultTimeout when zero
}

// PRMCandidates are where the protected resource metadata of upstreamURL is
// looked for, in the MCP authorization spec's order: the challenge's
// resource_metadata, else the RFC 9728 well-known URLs of the upstream's
// URL (with its path inserted, then at the root).
func PRMCandidates(upstreamURL string, ch Challenge) []string {
	if ch.ResourceMetadata != "" {
		return []string{ch.ResourceMetadata}
	}
	u, err := url.Parse(upstreamURL)
	if err != nil {
		return nil
	}
	root := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource"
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		return []string{root + p, root}
	}
	return []string{root}
}

// ProtectedResource fetches and checks the protected resource metadata of
// upstreamURL: nil (no error) when there is none at the well-known URLs;
// an error when the challenge names a document that is not there, or the
// document is for another resource (ResourceCovers). at is the URL read.
func (d *Discoverer) ProtectedResource(ctx context.Context, upstreamURL string, ch Challenge) (m *ResourceMetadata, at string, err error) {
	for _, at := range PRMCandidates(upstreamURL, ch) {
		if err := SecureEndpoint(at); err != nil {
			return nil, at, fmt.Errorf("the upstream's resource_metadata %q %v", at, err)
		}
		var m ResourceMetadata
		found, err := d.fetch(ctx, at, &m)
		if err != nil {
			return nil, at, err
		}
		if !found {
			if ch.ResourceMetadata != "" {
				return nil, at, fmt.Errorf("the resource_metadata %s the upstream's challenge names is not there", at)
			}
			continue
		}
		if !ResourceCovers(m.Resource, upstreamURL) {
			return nil, at, fmt.Errorf("the protected resource metadata at %s is for resource %q, which is not the upstream %s; refusing to obtain a token for it", at, m.Resource, upstreamURL)
		}
		return &m, at, nil
	}
	return nil, "", nil
}

// ASCandidates are where the metadata of the authorization server issuer is
// looked for (MCP authorization spec, "Authorization Server Metadata
// Discovery"): RFC 8414 then OpenID Connect discovery with the issuer's
// path inserted after the well-known prefix, and for an issuer with a path
// also OpenID Connect's appended form last.
func ASCandidates(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("authorization server %q is not a URL", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	path := strings.TrimSuffix(u.Path, "/")
	c := []string{origin + "/.well-known/oauth-authorization-server" + path, origin + "/.well-known/openid-configuration" + path}
	if path != "" {
		c = append(c, origin+path+"/.well-known/openid-configuration")
	}
	return c, nil
}

// AuthorizationServer fetches the metadata of the authorization server
// issuer and checks that it names exactly issuer (RFC 8414 section 3.3: a
// simple string comparison) and a token endpoint that is safe to use. at is
// the URL read.
func (d *Discoverer) AuthorizationServer(ctx context.Context, issuer string) (m *ServerMetadata, at string, err error) {
	if err := SecureEndpoint(issuer); err != nil {
		return nil, "", fmt.Errorf("authorization server %q %v", issuer, err)
	}
	candidates, err := ASCandidates(issuer)
	if err != nil {
		return nil, "", err
	}
	for _, at := range candidates {
		var m ServerMetadata
		found, err := d.fetch(ctx, at, &m)
		if err != nil {
			return nil, at, err
		}
		if !found {
			continue
		}
		if m.Issuer != issuer {
			return nil, at, fmt.Errorf("the authorization server metadata at %s names issuer %q, not %q, so it must not be used", at, m.Issuer, issuer)
		}
		if m.TokenEndpoint == "" {
			return nil, at, fmt.Errorf("the authorization server metadata at %s names no token_endpoint", at)
		}
		if err := SecureEndpoint(m.TokenEndpoint); err != nil {
			return nil, at, fmt.Errorf("the token_endpoint %q in %s %v", m.TokenEndpoint, at, err)
		}
		return &m, at, nil
	}
	return nil, "", fmt.Errorf("found no authorization server metadata for %s (asked %s)", issuer, strings.Join(candidates, ", "))
}

// errNotJSON marks a document that is not the JSON object expected.
var errNotJSON = errors.New("not a JSON object")

// fetch GETs one metadata document into v. It reports false for a 404 or
// 410 (not published there) and fails for anything else but a JSON 200.
func (d *Discoverer) fetch(ctx context.Context, at string, v any) (bool, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, at, nil)
	if err != nil {
		return false, fmt.Errorf("metadata URL %q: %v", at, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := d.HTTP.Do(req)
	if err != nil {
		return false, fmt.Errorf("GET %s: %v", at, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return false, nil
	case resp.StatusCode != http.StatusOK:
		return false, fmt.Errorf("GET %s answered HTTP %d", at, resp.StatusCode)
	}
	b, err := readBounded(resp.Body)
	if err != nil {
		return false, fmt.Errorf("GET %s: %v", at, err)
	}
	if err := decodeObject(b, v); err != nil {
		return false, fmt.Errorf("the metadata at %s is %v", at, err)
	}
	return true, nil
}

// readBounded reads a response body of at most MaxDocumentBytes.
func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxDocumentBytes+1))
	switch {
	case err != nil:
		return nil, err
	case len(b) > MaxDocumentBytes:
		return nil, fmt.Errorf("the answer is larger than %d bytes", MaxDocumentBytes)
	}
	return b, nil
}

// decodeObject decodes a JSON object into v.
func decodeObject(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", errNotJSON, err)
	}
	return nil
}

// SecureEndpoint accepts https URLs, and http ones on a loopback host
// (where config accepts them too).
func SecureEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("is not an absolute http(s) URL")
	case u.Scheme == "http" && !config.IsLoopbackHost(u.Hostname()):
		return fmt.Errorf("is plain http on a host that is not loopback")
	case u.Fragment != "":
		return fmt.Errorf("has a fragment")
	}
	return nil
}

// ResourceCovers reports whether a protected resource identifier names the
// upstream at upstreamURL: the same origin, and the upstream's path is the
// resource's path or below it (a server may publish one resource for
// several endpoints under it).
func ResourceCovers(resource, upstreamURL string) bool {
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
