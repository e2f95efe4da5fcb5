package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/principal"
)

// Options configure an Authenticator.
type Options struct {
	Logger *zap.Logger
	// HTTPClient fetches discovery documents and JWKS (nil: a client with
	// timeouts).
	HTTPClient *http.Client
	// Now is the clock (tests).
	Now func() time.Time
	// KeyRefreshInterval is the least time between two fetches of an
	// issuer's JWKS (or discovery retries); a token naming an unknown key
	// triggers a fetch only this often. Default DefaultKeyRefreshInterval.
	KeyRefreshInterval time.Duration
	// KeyMaxAge is how long fetched keys are used before they are fetched
	// again, so that keys an issuer withdrew stop working. Default 15m.
	KeyMaxAge time.Duration
	// ReadFile reads API key files (nil: os.ReadFile).
	ReadFile func(string) ([]byte, error)
	// Local is the gateway's own authorization server (login:), whose
	// tokens are accepted beside the configured issuers (nil: none).
	Local *LocalIssuer
}

// LocalIssuer is an issuer inside the gateway (internal/login): its keys
// are read in process, never fetched, and its tokens are for exactly one
// route — aud must be that route's resource URI; public_url alone, which
// an OIDC token may carry for every route, is not enough.
type LocalIssuer struct {
	Issuer string
	Keys   oidc.KeySet
	// Active reports whether the grant a token was issued under (its fid
	// claim) still stands: a grant revoked — a replayed code, a reused
	// refresh token, a withdrawn approval — ends its access tokens at
	// once rather than when they expire (nil: every grant stands).
	Active func(grant string) bool
}

// DefaultKeyRefreshInterval bounds JWKS fetches per issuer. It is short
// because it is also how long a token of a freshly rotated key can be
// refused (its kid is unknown until the next fetch), and one fetch a second
// is still nothing to an identity provider however many forged kids arrive:
// concurrent unknown kids share one fetch.
const DefaultKeyRefreshInterval = time.Second

// Authenticator decides who a request comes from. It is safe for
// concurrent use.
type Authenticator struct {
	local     *LocalIssuer // nil: no login:
	log       *zap.Logger
	publicURL string
	issuers   map[string]*issuer // by issuer URL
	order     []string           // issuer URLs in config order
	keys      []apiKey
	required  []string // auth.required_scopes
	now       func() time.Time
	cache     *tokenCache
	// introspect checks opaque tokens (auth.introspection; nil: none).
	introspect *introspector
	// certs maps verified client certificates to principals
	// (auth.client_certificates; nil: none).
	certs *config.ClientCertificates
}

// apiKey is one configured key; only its SHA-256 hash is kept.
type apiKey struct {
	hash      [sha256.Size]byte
	principal *Principal
}

// New builds the authenticator for cfg, reading API key files. It returns
// nil, nil when cfg configures no authentication. Errors name the key and
// file, never the secret.
func New(cfg *config.Config, opts Options) (*Authenticator, error) {
	if !cfg.Auth.Enabled() {
		return nil, nil
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = fetchTimeout
		opts.HTTPClient = &http.Client{Transport: t, Timeout: fetchTimeout}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.KeyRefreshInterval <= 0 {
		opts.KeyRefreshInterval = DefaultKeyRefreshInterval
	}
	if opts.KeyMaxAge <= 0 {
		opts.KeyMaxAge = 15 * time.Minute
	}
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	a := &Authenticator{
		local:     opts.Local,
		log:       opts.Logger,
		publicURL: cfg.PublicURL,
		issuers:   map[string]*issuer{},
		required:  cfg.Auth.RequiredScopes,
		now:       opts.Now,
		cache:     newTokenCache(),
		certs:     cfg.Auth.ClientCertificates,
	}
	if l := opts.Local; l != nil {
		// First: the RFC 9728 documents name it first, so clients that
		// read one authorization server come to the gateway.
		is := newIssuer(&config.OIDC{Issuer: l.Issuer, Algorithms: []string{"ES256"}, Leeway: config.Duration(config.DefaultLeeway), GroupsClaim: "groups"}, opts.HTTPClient, opts.Now, opts.KeyRefreshInterval, opts.KeyMaxAge)
		is.local = l.Keys
		a.issuers[l.Issuer] = is
		a.order = append(a.order, l.Issuer)
	}
	for _, o := range cfg.Auth.AllIssuers() {
		a.issuers[o.Issuer] = newIssuer(o, opts.HTTPClient, opts.Now, opts.KeyRefreshInterval, opts.KeyMaxAge)
		a.order = append(a.order, o.Issuer)
	}
	if in := cfg.Auth.Introspection; in != nil {
		var err error
		if a.introspect, err = newIntrospector(in, opts); err != nil {
			return nil, err
		}
	}
	for i, k := range cfg.Auth.APIKeys {
		secret := k.Key
		if k.KeyFile != "" {
			b, err := opts.ReadFile(k.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("auth.api_keys[%d] (%s): cannot read key_file: %w", i, k.Name, err)
			}
			secret = string(b)
		}
		secret = strings.TrimSpace(secret) // files end with a newline
		if secret == "" {
			return nil, fmt.Errorf("auth.api_keys[%d] (%s): the key is empty; put a random secret in it (e.g. openssl rand -base64 32)", i, k.Name)
		}
		if len(secret) < 16 {
			a.log.Warn("an API key is short and may be guessed; generate one with openssl rand -base64 32", zap.String("api_key", k.Name))
		}
		subject := k.Principal
		if subject == "" {
			subject = k.Name
		}
		a.keys = append(a.keys, apiKey{
			hash: sha256.Sum256([]byte(secret)),
			principal: &Principal{
				Subject: subject,
				APIKey:  k.Name,
				Groups:  slices.Clone(k.Groups),
				Scopes:  slices.Clone(k.Scopes),
				// No claims; prepared once for every request of the key.
				PreparedClaims: principal.NewClaims(nil),
			},
		})
	}
	return a, nil
}

// RequiredScopes returns auth.required_scopes followed by the route's own
// scopes, without duplicates.
func (a *Authenticator) RequiredScopes(route []string) []string {
	out := slices.Clone(a.required)
	for _, s := range route {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Authenticate returns the principal of r, which is a request for the
// protected resource with canonical URI resource (see Resource), or an
// *Error saying why it is refused. It reads only headers and the URL,
// never the body. Scopes are not checked here (see Authorize).
//
// The returned Principal is shared and must not be modified.
func (a *Authenticator) Authenticate(r *http.Request, resource string) (*Principal, error) {
	if r.URL.RawQuery != "" {
		q := r.URL.Query()
		for _, name := range []string{"access_token", "api_key", "apikey"} {
			if q.Has(name) {
				return nil, errorf(TokenInQuery, "credentials in the URL ("+name+") are refused because URLs end up in logs and browser history; send an Authorization: Bearer header")
			}
		}
	}
	if a.certs != nil && !hasCredentialHeader(r) {
		switch p, cerr := a.certificate(r); {
		case cerr != nil:
			return nil, cerr
		case p != nil:
			return p, nil
		}
	}
	cred, err := credential(r)
	if err != nil {
		return nil, err
	}
	// Hashed from a stack buffer: a token's usual size needs no allocation.
	var buf [4096]byte
	h := sha256.Sum256(append(buf[:0], cred...))
	if p := a.apiKey(h); p != nil {
		return p, nil
	}
	if len(a.issuers) == 0 && a.introspect == nil {
		return nil, errorf(Malformed, "the credential is not a configured API key")
	}
	if len(cred) > maxToken {
		return nil, errorf(Malformed, fmt.Sprintf("the bearer token is longer than %d bytes", maxToken))
	}
	if p := a.cache.get(h, a.now(), func(is *issuer, aud string) bool {
		if is.local != nil {
			return aud == resource
		}
		return a.acceptsAudience(is.cfg.Audience, resource, aud)
	}); p != nil {
		return a.checkLocal(p)
	}
	alg, iss, perr := peek(cred)
	if a.introspect != nil && (perr != nil || a.issuers[iss] == nil) {
		// Not a JWT of a configured issuer: an opaque token (RFC 7662).
		p, ierr := a.introspect.check(r.Context(), cred, h, a.resourceAudiences(a.introspect.cfg.Audience, resource))
		if ierr != nil {
			return nil, ierr
		}
		return p, nil
	}
	if perr != nil {
		return nil, perr
	}
	is := a.issuers[iss]
	if is == nil {
		return nil, errorf(UnknownIssuer, fmt.Sprintf("tokens issued by %q are not accepted here (accepted: %s)", quoteDetail(iss), strings.Join(a.order, ", ")))
	}
	p, entry, verr := is.verify(r.Context(), cred, alg, a.audiences(is, resource))
	if verr != nil {
		return nil, verr
	}
	a.cache.put(h, entry)
	return a.checkLocal(p)
}

// checkLocal refuses a token of the gateway's own issuer whose grant was
// revoked; every other principal passes.
func (a *Authenticator) checkLocal(p *Principal) (*Principal, error) {
	if a.local == nil || a.local.Active == nil || p.Issuer != a.local.Issuer {
		return p, nil
	}
	if fid, _ := p.Claims["fid"].(string); fid == "" || !a.local.Active(fid) {
		return nil, errorf(Inactive, "the token's grant was revoked (a replayed code or refresh token, or a withdrawn approval); sign in again")
	}
	return p, nil
}

// Authorize checks that p holds every scope in required. The refusal
// lists every required scope, not only the missing ones: a client that
// re-authorizes with what the challenge names must not lose the scopes it
// already had (MCP authorization, scope challenge handling).
func Authorize(p *Principal, required []string) error {
	if missing := p.MissingScopes(required); len(missing) > 0 {
		return &Error{Reason: InsufficientScope, Detail: "the credential lacks scope " + strings.Join(missing, " "), Scopes: slices.Clone(required)}
	}
	return nil
}

// credential extracts the bearer token (or X-API-Key) from r.
func credential(r *http.Request) (string, *Error) {
	authz := r.Header.Values("Authorization")
	if len(authz) == 0 {
		if k := r.Header.Values("X-Api-Key"); len(k) == 1 && strings.TrimSpace(k[0]) != "" {
			return strings.TrimSpace(k[0]), nil
		}
		return "", errorf(NoCredentials, "authentication is required; send Authorization: Bearer <token>")
	}
	if len(authz) > 1 {
		return "", errorf(BadRequest, "more than one Authorization header")
	}
	scheme, tok, _ := strings.Cut(strings.TrimSpace(authz[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", errorf(BadRequest, "the Authorization scheme must be Bearer")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", errorf(BadRequest, "the Bearer token is empty")
	}
	return tok, nil
}

// apiKey returns the principal of the API key whose hash is h, if any. Every
// key's hash is compared, in constant time, so the time taken says nothing
// about which key, or how much of one, matched.
func (a *Authenticator) apiKey(h [sha256.Size]byte) *Principal {
	var found *Principal
	for i := range a.keys {
		if subtle.ConstantTimeCompare(h[:], a.keys[i].hash[:]) == 1 {
			found = a.keys[i].principal
		}
	}
	return found
}

// audiences are the aud values accepted for resource: the issuer's
// configured audience, or the gateway's canonical URIs (public_url and the
// route's resource URI). The last one is the one named in messages.
func (a *Authenticator) audiences(is *issuer, resource string) []string {
	if is.local != nil {
		return []string{resource}
	}
	return a.resourceAudiences(is.cfg.Audience, resource)
}

// resourceAudiences is audience when configured, else the gateway's
// canonical URIs for resource.
func (a *Authenticator) resourceAudiences(audience, resource string) []string {
	if audience != "" {
		return []string{audience}
	}
	return []string{a.publicURL, strings.TrimSuffix(a.publicURL, "/"), resource}
}

// acceptsAudience reports whether aud is one of resourceAudiences(audience,
// resource), without making the list: a cached token is checked per
// request.
func (a *Authenticator) acceptsAudience(audience, resource, aud string) bool {
	if audience != "" {
		return aud == audience
	}
	return aud == a.publicURL || aud == strings.TrimSuffix(a.publicURL, "/") || aud == resource
}

// Resource is the canonical URI (RFC 8707) of the route at path: public_url
// followed by the route path; "/" is public_url itself.
func (a *Authenticator) Resource(path string) string {
	if path == "" || path == "/" {
		return a.publicURL
	}
	return strings.TrimSuffix(a.publicURL, "/") + path
}

// MetadataPath is the path the gateway serves route path's Protected
// Resource Metadata at (RFC 9728 section 3.1).
func MetadataPath(path string) string {
	if path == "/" {
		path = ""
	}
	return WellKnownPath + path
}

// WellKnownPath is where Protected Resource Metadata lives.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// MetadataURL is the absolute URL of route path's metadata document, as
// clients reach it through public_url; "" when there is no issuer (API
// keys alone need no discovery).
func (a *Authenticator) MetadataURL(path string) string {
	if len(a.issuers) == 0 || a.publicURL == "" {
		return ""
	}
	u, err := url.Parse(a.publicURL)
	if err != nil {
		return ""
	}
	// The well-known segment goes between the host and the path of the
	// resource URI.
	rest := strings.TrimSuffix(u.Path, "/")
	if path != "/" {
		rest += path
	}
	return u.Scheme + "://" + u.Host + WellKnownPath + rest
}

// Issuers returns the configured issuer URLs.
func (a *Authenticator) Issuers() []string { return slices.Clone(a.order) }
