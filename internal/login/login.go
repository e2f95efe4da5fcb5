// Package login makes mcpgw the OAuth 2.1 authorization server its
// clients see (docs/login.md): RFC 8414 metadata, RFC 7591 registration
// and Client ID Metadata Documents, /authorize with PKCE, a consent page
// of its own, /token with refresh rotation and reuse detection, RFC 7009
// revocation, and a browser session other packages ask "who is this
// browser's user". Sign-in itself is delegated to the company's OpenID
// provider, for which the gateway is one confidential client; the
// provider's tokens never leave this package. The tokens it issues are
// short-lived JWTs for exactly one route, which internal/auth accepts
// through LocalIssuer.
//
// Everything it keeps is bounded (login.max_*), counted in metrics, and
// refused with a message naming the bound when full. Clients, consents
// and refresh token families survive restarts in the state file; sign-ins
// under way and unredeemed codes live in memory for minutes.
package login

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/outbound"
)

// Options configure a Server.
type Options struct {
	Logger *zap.Logger
	// StateDir holds the key ring and the state file unless login.key_file
	// and login.state_file name others; empty keeps both in memory
	// (tests).
	StateDir string
	// Registerer takes the login metrics (nil: none).
	Registerer prometheus.Registerer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// ProviderClient talks to the provider (nil: no redirects, 10s).
	ProviderClient *http.Client
	// ReadFile reads the provider's client secret file (nil: os.ReadFile).
	ReadFile func(string) ([]byte, error)
}

// User is a browser's signed-in user, as the provider named them.
type User struct {
	Subject string `json:"sub"`
	Issuer  string `json:"iss"`
	Name    string `json:"name,omitempty"`
	Email   string `json:"email,omitempty"`
	// Username is the provider's preferred_username (a display name of
	// the account, not a verified address).
	Username string   `json:"preferred_username,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// Server is the gateway's authorization server. It is safe for
// concurrent use.
type Server struct {
	log       *zap.Logger
	cfg       *config.Login
	issuer    string // public_url without a trailing slash
	publicURL string
	origin    string // scheme://host of public_url
	secure    bool   // public_url is https: Secure cookies
	now       func() time.Time
	keys      *keyRing
	store     *store
	prov      *provider
	cimd      *http.Client
	cimdHTTP  bool // login.insecure_client_metadata_loopback
	met       *loginMetrics

	mu           sync.Mutex
	routes       map[string]routeInfo // by resource URI
	static       map[string]*client   // login.clients
	metaCache    map[string]*client   // Client ID Metadata Documents, by URL
	pending      map[string]*pending  // by id
	pendingBySrc map[string]int       // pending, by the address that began them
	byState      map[string]string    // provider state → pending id
	codes        map[string]*code     // by hash
	regs         map[string]*window   // registrations per source address
	fetching     chan struct{}        // Client ID Metadata Document fetches under way (maxFetching)
}

// routeInfo is what the consent page and the token need of a route.
type routeInfo struct {
	path   string
	scopes []string // every scope the route requires
}

// New builds the server for cfg (cfg.Login must be set).
func New(cfg *config.Config, opts Options) (*Server, error) {
	l := cfg.Login
	if l == nil || l.Provider == nil {
		return nil, errors.New("login: not configured")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	if opts.ProviderClient == nil {
		opts.ProviderClient = outbound.Client(nil, providerTimeout) // a configured provider: any address, no redirects
	}
	secret := l.Provider.ClientSecret
	if l.Provider.ClientSecretFile != "" {
		b, err := opts.ReadFile(l.Provider.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("login.provider.client_secret_file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	if secret == "" {
		return nil, errors.New("login.provider: the client secret is empty; put the secret the provider issued for the gateway in client_secret_file")
	}
	pu, err := url.Parse(cfg.PublicURL)
	if err != nil || pu.Host == "" {
		return nil, fmt.Errorf("login needs public_url: %q is not an absolute URL", cfg.PublicURL)
	}
	keyPath, statePath := l.KeyFile, l.StateFile
	if opts.StateDir != "" {
		if keyPath == "" {
			keyPath = filepath.Join(opts.StateDir, DefaultKeyFile)
		}
		if statePath == "" {
			statePath = filepath.Join(opts.StateDir, DefaultStateFile)
		}
	}
	keys, created, err := loadKeyRing(keyPath)
	if err != nil {
		return nil, err
	}
	if created {
		opts.Logger.Info("made the login key ring in the state directory; the gateway's tokens and sign-in cookies survive a restart", zap.String("file", keyPath))
	}
	st, err := openStore(statePath, opts.Now, func(err error) {
		opts.Logger.Error("login: cannot write the state file; changes since the last write are lost at the next restart", zap.String("file", statePath), zap.Error(err))
	})
	if err != nil {
		return nil, err
	}
	s := &Server{
		log:          opts.Logger,
		cfg:          l,
		issuer:       strings.TrimSuffix(cfg.PublicURL, "/"),
		publicURL:    cfg.PublicURL,
		origin:       pu.Scheme + "://" + pu.Host,
		secure:       pu.Scheme == "https",
		now:          opts.Now,
		keys:         keys,
		store:        st,
		prov:         &provider{cfg: l.Provider, secret: secret, client: opts.ProviderClient, now: opts.Now},
		cimdHTTP:     l.InsecureClientMetadataLoopback,
		met:          newLoginMetrics(opts.Registerer),
		static:       map[string]*client{},
		metaCache:    map[string]*client{},
		pending:      map[string]*pending{},
		pendingBySrc: map[string]int{},
		byState:      map[string]string{},
		codes:        map[string]*code{},
		regs:         map[string]*window{},
		fetching:     make(chan struct{}, maxFetching),
	}
	var allow []string
	if s.cimdHTTP {
		allow = []string{"127.0.0.1/32", "::1/128"}
	}
	guard, err := outbound.NewGuard(allow, "login.insecure_client_metadata_loopback")
	if err != nil {
		return nil, err
	}
	s.cimd = outbound.Client(guard, cimdTimeout)
	for _, c := range l.Clients {
		name := c.Name
		if name == "" {
			name = c.ClientID
		}
		s.static[c.ClientID] = &client{ID: c.ClientID, Name: name, RedirectURIs: slices.Clone(c.RedirectURIs), Static: true}
	}
	s.Update(cfg)
	s.gauges()
	return s, nil
}

// Close writes the state changes not yet on disk (the gateway's
// shutdown calls it).
func (s *Server) Close() error { return s.store.close() }

// Update takes the routes of a reloaded config (the rest of login: needs
// a restart).
func (s *Server) Update(cfg *config.Config) {
	routes := map[string]routeInfo{}
	var required []string
	if cfg.Auth != nil {
		required = cfg.Auth.RequiredScopes
	}
	for _, r := range cfg.Routes {
		if r == nil {
			continue
		}
		scopes := slices.Clone(required)
		for _, sc := range r.Scopes {
			if !slices.Contains(scopes, sc) {
				scopes = append(scopes, sc)
			}
		}
		routes[s.Resource(r.Path)] = routeInfo{path: r.Path, scopes: scopes}
	}
	s.mu.Lock()
	s.routes = routes
	s.mu.Unlock()
}

// Resource is the canonical URI of the route at path, as internal/auth
// computes it.
func (s *Server) Resource(path string) string {
	if path == "" || path == "/" {
		return s.publicURL
	}
	return s.issuer + path
}

// Issuer is the gateway's issuer identifier.
func (s *Server) Issuer() string { return s.issuer }

// KeySet verifies the gateway's tokens (go-oidc's KeySet).
func (s *Server) KeySet() oidc.KeySet { return s.keys }

// Paths are the chi patterns the server answers, relative to the public
// URL's path; the router mounts Handler at each (and at the well-known
// ones, which it places itself: WellKnownPaths).
func (s *Server) Paths() []string {
	return []string{"/oauth/jwks", "/oauth/register", "/oauth/authorize", config.LoginCallbackPath, "/oauth/consent", "/oauth/token", "/oauth/revoke", "/oauth/signin", "/oauth/consents", "/oauth/signout"}
}

// WellKnownPaths are where the metadata document is served: RFC 8414's
// path-inserted form, OpenID discovery's appended form and, for an issuer
// with a path, the root forms too.
func (s *Server) WellKnownPaths() []string {
	u, _ := url.Parse(s.issuer)
	p := strings.TrimSuffix(u.Path, "/")
	out := []string{"/.well-known/oauth-authorization-server" + p, p + "/.well-known/openid-configuration"}
	if p != "" {
		out = append(out, "/.well-known/openid-configuration"+p)
	}
	return out
}

// ServeHTTP answers the login endpoints (by the path after public_url's
// path) and the metadata documents.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	path := r.URL.Path
	if slices.Contains(s.WellKnownPaths(), path) {
		s.serveMetadata(w, r)
		return
	}
	if u, _ := url.Parse(s.issuer); u != nil {
		path = strings.TrimPrefix(path, strings.TrimSuffix(u.Path, "/"))
	}
	switch path {
	case "/oauth/jwks":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(s.keys.public)
	case "/oauth/register":
		s.serveRegister(w, r)
	case "/oauth/authorize":
		s.serveAuthorize(w, r)
	case config.LoginCallbackPath:
		s.serveCallback(w, r)
	case "/oauth/consent":
		s.serveConsent(w, r)
	case "/oauth/token":
		s.serveToken(w, r)
	case "/oauth/revoke":
		s.serveRevoke(w, r)
	case "/oauth/signin":
		s.SignIn(w, r, r.URL.Query().Get("return_to"))
	case "/oauth/consents":
		s.serveConsents(w, r)
	case "/oauth/signout":
		s.serveSignout(w, r)
	default:
		http.NotFound(w, r)
	}
}

// serveMetadata is the RFC 8414 document (also served as OpenID
// discovery: clients that look only there find the same endpoints).
func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	var scopes []string
	for _, ri := range s.routes {
		for _, sc := range ri.scopes {
			if !slices.Contains(scopes, sc) {
				scopes = append(scopes, sc)
			}
		}
	}
	s.mu.Unlock()
	slices.Sort(scopes)
	m := map[string]any{
		"issuer":                                         s.issuer,
		"authorization_endpoint":                         s.issuer + "/oauth/authorize",
		"token_endpoint":                                 s.issuer + "/oauth/token",
		"revocation_endpoint":                            s.issuer + "/oauth/revoke",
		"jwks_uri":                                       s.issuer + "/oauth/jwks",
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          s.cfg.ClientMetadataDocumentsOn(),
		"subject_types_supported":                        []string{"public"},
		"id_token_signing_alg_values_supported":          []string{"ES256"},
	}
	if len(scopes) > 0 {
		m["scopes_supported"] = scopes
	}
	if s.cfg.DynamicRegistrationOn() {
		m["registration_endpoint"] = s.issuer + "/oauth/register"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(m)
}

// sourceAddress is the client's address for the per-source bounds: the
// connection's peer (a forwarded header is anyone's to write).
func sourceAddress(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}
