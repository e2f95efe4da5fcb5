package oauthclient

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Registration kinds.
const (
	KindPreregistered    = "preregistered"     // Config.Preregistered
	KindMetadataDocument = "metadata_document" // Config.MetadataDocumentURL as the client_id
	KindDynamic          = "dynamic"           // RFC 7591
)

// Registration is the client's identity at one authorization server for
// one redirect URI.
type Registration struct {
	Issuer       string `json:"issuer"`
	RedirectURI  string `json:"redirect_uri"`
	Kind         string `json:"kind"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	// AuthMethod is the token endpoint authentication the server assigned
	// (or was configured); empty: choose from the server's metadata.
	AuthMethod string `json:"auth_method,omitempty"`
	// SecretExpires is when the server said the client secret expires
	// (client_secret_expires_at); zero: never. An expired registration is
	// made anew.
	SecretExpires time.Time `json:"secret_expires,omitempty"`
}

// RegistrationStore remembers dynamic registrations per authorization
// server (issuer) and redirect URI, so each flow does not register anew,
// and a server that is not the one registered with gets a registration of
// its own (SEP-2352: credentials are never carried to another server).
type RegistrationStore interface {
	Load(issuer, redirectURI string) (Registration, bool)
	Store(r Registration)
	Delete(issuer, redirectURI string)
}

// MemoryRegistrations is a RegistrationStore in memory holding at most max
// registrations; when full, the oldest is dropped (it is only redone at
// the next flow with that server).
type MemoryRegistrations struct {
	mu    sync.Mutex
	max   int
	order []string
	regs  map[string]Registration
}

// NewMemoryRegistrations returns an empty store of at most max entries.
func NewMemoryRegistrations(max int) *MemoryRegistrations {
	return &MemoryRegistrations{max: max, regs: map[string]Registration{}}
}

func regKey(issuer, redirectURI string) string { return issuer + "\x00" + redirectURI }

// Load returns the registration with issuer for redirectURI.
func (m *MemoryRegistrations) Load(issuer, redirectURI string) (Registration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.regs[regKey(issuer, redirectURI)]
	return r, ok
}

// Store keeps r, replacing one for the same server and redirect URI.
func (m *MemoryRegistrations) Store(r Registration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := regKey(r.Issuer, r.RedirectURI)
	if _, ok := m.regs[k]; !ok {
		for len(m.order) >= m.max && len(m.order) > 0 {
			delete(m.regs, m.order[0])
			m.order = m.order[1:]
		}
		m.order = append(m.order, k)
	}
	m.regs[k] = r
}

// Delete forgets the registration with issuer for redirectURI.
func (m *MemoryRegistrations) Delete(issuer, redirectURI string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := regKey(issuer, redirectURI)
	if _, ok := m.regs[k]; ok {
		delete(m.regs, k)
		m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == k })
	}
}

// Len is how many registrations are held (a gauge for metrics).
func (m *MemoryRegistrations) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.regs)
}

// registration is the client's identity at as for redirectURI, in the MCP
// spec's order: pre-registered credentials, else a client ID metadata
// document where the server supports one, else the dynamic registration
// made before with this server, else a new one.
func (c *Client) registration(ctx context.Context, as *ServerMetadata, redirectURI string) (Registration, error) {
	if cr, ok := c.preregistered(as.Issuer); ok {
		return Registration{Issuer: as.Issuer, RedirectURI: redirectURI, Kind: KindPreregistered, ClientID: cr.ClientID, ClientSecret: cr.ClientSecret, AuthMethod: cr.AuthMethod}, nil
	}
	if c.cfg.MetadataDocumentURL != "" && as.ClientIDMetadataDocument {
		return Registration{Issuer: as.Issuer, RedirectURI: redirectURI, Kind: KindMetadataDocument, ClientID: c.cfg.MetadataDocumentURL, AuthMethod: AuthMethodNone}, nil
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if r, ok := c.regs.Load(as.Issuer, redirectURI); ok && (r.SecretExpires.IsZero() || c.cfg.Now().Before(r.SecretExpires)) {
		return r, nil
	}
	if c.cfg.NoDynamicRegistration {
		how := "no client is configured for it"
		if c.cfg.MetadataDocumentURL != "" {
			how = "it does not accept client ID metadata documents (client_id_metadata_document_supported)"
		}
		return Registration{}, c.fail("registration", "the authorization server %s cannot be used: %s, and dynamic registration is off; register the gateway there with redirect URI %s and configure its client_id, or allow dynamic registration", as.Issuer, how, redirectURI)
	}
	if as.RegistrationEndpoint == "" {
		return Registration{}, c.fail("registration", "the authorization server %s offers no dynamic client registration (no registration_endpoint) and no client is configured for it; register the gateway there with redirect URI %s and configure its client_id and client_secret", as.Issuer, redirectURI)
	}
	r, err := c.register(ctx, as, redirectURI)
	if err != nil {
		return Registration{}, err
	}
	c.regs.Store(r)
	c.log.Info("registered with the authorization server", zap.String("upstream", c.cfg.Name), zap.String("issuer", as.Issuer), zap.String("client_id", r.ClientID))
	return r, nil
}

func (c *Client) preregistered(issuer string) (Credentials, bool) {
	if cr, ok := c.cfg.Preregistered[issuer]; ok && cr.ClientID != "" {
		return cr, true
	}
	cr, ok := c.cfg.Preregistered[""]
	return cr, ok && cr.ClientID != ""
}

// registrationRequest is RFC 7591 client metadata.
type registrationRequest struct {
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	ApplicationType         string   `json:"application_type"`
}

type registrationResponse struct {
	ClientID                string `json:"client_id"`
	ClientSecret            string `json:"client_secret"`
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method"`
	ClientSecretExpiresAt   int64  `json:"client_secret_expires_at"`
	oauthError
}

// register makes an RFC 7591 dynamic registration with as.
func (c *Client) register(ctx context.Context, as *ServerMetadata, redirectURI string) (Registration, error) {
	if err := SecureEndpoint(as.RegistrationEndpoint); err != nil {
		return Registration{}, c.fail("registration", "the registration_endpoint %q of %s %v", as.RegistrationEndpoint, as.Issuer, err)
	}
	method := registerMethod(as.TokenEndpointAuthMethods)
	if method == "" {
		return Registration{}, c.fail("registration", "the authorization server %s accepts only %q at its token endpoint; mcpgw authenticates with %s, %s or (as a public client) %s", as.Issuer, as.TokenEndpointAuthMethods, AuthMethodBasic, AuthMethodPost, AuthMethodNone)
	}
	grants := []string{"authorization_code"}
	if c.cfg.Offline {
		grants = append(grants, "refresh_token")
	}
	body, _ := json.Marshal(registrationRequest{
		ClientName: c.cfg.ClientName, RedirectURIs: []string{redirectURI}, GrantTypes: grants,
		ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: method, ApplicationType: c.cfg.ApplicationType,
	})
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, as.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return Registration{}, c.fail("registration", "registration_endpoint %q: %v", as.RegistrationEndpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return Registration{}, c.fail("registration", "POST %s: %v", as.RegistrationEndpoint, err)
	}
	defer resp.Body.Close()
	b, err := readBounded(resp.Body)
	if err != nil {
		return Registration{}, c.fail("registration", "POST %s: %v", as.RegistrationEndpoint, err)
	}
	var rr registrationResponse
	derr := decodeObject(b, &rr)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		e := c.fail("registration", "POST %s answered HTTP %d", as.RegistrationEndpoint, resp.StatusCode)
		e.Code, e.Description = rr.Code, rr.Description
		return Registration{}, e
	}
	switch {
	case derr != nil:
		return Registration{}, c.fail("registration", "the registration answer of %s is %v", as.RegistrationEndpoint, derr)
	case rr.ClientID == "":
		return Registration{}, c.fail("registration", "the registration answer of %s has no client_id", as.RegistrationEndpoint)
	}
	r := Registration{Issuer: as.Issuer, RedirectURI: redirectURI, Kind: KindDynamic, ClientID: rr.ClientID, ClientSecret: rr.ClientSecret, AuthMethod: rr.TokenEndpointAuthMethod}
	if r.AuthMethod == "" && r.ClientSecret != "" {
		r.AuthMethod = method
	}
	if rr.ClientSecretExpiresAt > 0 {
		r.SecretExpires = time.Unix(rr.ClientSecretExpiresAt, 0)
	}
	return r, nil
}

// registerMethod is the token endpoint authentication to register with,
// from what the server accepts: a client secret (basic, else post) where
// it takes one, else none (a public client, PKCE-protected); "" when it
// accepts none of them. RFC 8414: an empty list means client_secret_basic.
func registerMethod(supported []string) string {
	switch {
	case len(supported) == 0, slices.Contains(supported, AuthMethodBasic):
		return AuthMethodBasic
	case slices.Contains(supported, AuthMethodPost):
		return AuthMethodPost
	case slices.Contains(supported, AuthMethodNone):
		return AuthMethodNone
	}
	return ""
}

// tokenAuthMethod is how to authenticate at the token endpoint with r:
// what was assigned or configured, none without a secret, else the
// server's choice among client_secret_basic and client_secret_post.
func tokenAuthMethod(r Registration, supported []string) string {
	switch {
	case r.AuthMethod != "":
		return r.AuthMethod
	case r.ClientSecret == "":
		return AuthMethodNone
	case len(supported) == 0, slices.Contains(supported, AuthMethodBasic):
		return AuthMethodBasic
	case slices.Contains(supported, AuthMethodPost):
		return AuthMethodPost
	}
	return ""
}

// secret is the client secret for g's client: from the configuration or
// the registration it was made with; "" for a public client.
func (c *Client) secret(g Grant) (string, bool) {
	if cr, ok := c.preregistered(g.Issuer); ok && cr.ClientID == g.ClientID {
		return cr.ClientSecret, true
	}
	if r, ok := c.regs.Load(g.Issuer, g.RedirectURI); ok && r.ClientID == g.ClientID {
		return r.ClientSecret, true
	}
	if g.ClientID == c.cfg.MetadataDocumentURL && c.cfg.MetadataDocumentURL != "" {
		return "", true
	}
	return "", false
}
