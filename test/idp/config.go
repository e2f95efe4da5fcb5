package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Config is the JSON file the OP is started with: whom it knows, which
// clients may ask it for tokens, and how long its tokens live.
type Config struct {
	Users   []User   `json:"users"`
	Clients []Client `json:"clients"`
	// AccessTokenLifetime caps every access token's lifetime ("5m" when
	// empty; the example storage's own lifetime is 5 minutes, so a longer
	// value is refused). A short one lets tests see expiry and refresh.
	AccessTokenLifetime string `json:"access_token_lifetime"`
	// Discovery is which metadata documents the OP publishes: "oidc"
	// (the default: only /.well-known/openid-configuration, as many
	// OpenID providers do) or "both" (also the RFC 8414
	// /.well-known/oauth-authorization-server document, the same JSON).
	Discovery string `json:"discovery"`
	// RejectResource makes the OP behave like Entra ID (AADSTS9010010):
	// an authorization request carrying the RFC 8707 resource parameter
	// is answered error=invalid_target at the client's redirect URI.
	RejectResource bool `json:"reject_resource"`
	// RememberConsent keeps a browser signed in (a cookie of the OP) and
	// remembers which clients each user approved: a later authorization
	// request from such a client in that browser is approved without a
	// form, as real providers do, unless it asks prompt=login or
	// prompt=consent. This is what makes a confused-deputy attack on a
	// start link real in the tests.
	RememberConsent bool `json:"remember_consent"`
}

// User can sign in at the login form.
type User struct {
	ID       string `json:"id"`       // the tokens' sub
	Username string `json:"username"` // typed into the login form
	Password string `json:"password"`
	Email    string `json:"email"`
	// MayBeExchanged lets a client exchange this user's token without an
	// actor token (RFC 8693 impersonation). The example storage calls the
	// same permission IsAdmin; a user without it is refused with
	// invalid_grant, which is how tests provoke an IdP refusal.
	MayBeExchanged bool `json:"may_be_exchanged"`
}

// Client is an OAuth client registered at the OP.
type Client struct {
	ID string `json:"id"`
	// Type is "native" (public, PKCE, no secret) or "web" (confidential,
	// client_secret_basic; may also do token exchange).
	Type         string   `json:"type"`
	Secret       string   `json:"secret"`
	RedirectURIs []string `json:"redirect_uris"`
	// ClientCredentials lets a web client use the client_credentials
	// grant (its token's sub and aud are its client id).
	ClientCredentials bool `json:"client_credentials"`
}

func loadConfig(path string) (*Config, time.Duration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the OP config: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, 0, fmt.Errorf("%s: %w (see test/idp/README.md for the fields)", path, err)
	}
	lifetime := 5 * time.Minute
	if cfg.AccessTokenLifetime != "" {
		if lifetime, err = time.ParseDuration(cfg.AccessTokenLifetime); err != nil || lifetime <= 0 || lifetime > 5*time.Minute {
			return nil, 0, fmt.Errorf("%s: access_token_lifetime %q must be a duration in (0, 5m], e.g. 30s", path, cfg.AccessTokenLifetime)
		}
	}
	var errs []error
	switch cfg.Discovery {
	case "":
		cfg.Discovery = "oidc"
	case "oidc", "both":
	default:
		errs = append(errs, fmt.Errorf("discovery %q is neither \"oidc\" nor \"both\"", cfg.Discovery))
	}
	seen := map[string]bool{}
	for i, u := range cfg.Users {
		if u.ID == "" || u.Username == "" || u.Password == "" {
			errs = append(errs, fmt.Errorf("users[%d]: id, username and password are required", i))
		}
		if seen["user:"+u.Username] {
			errs = append(errs, fmt.Errorf("users[%d]: username %q is used twice", i, u.Username))
		}
		seen["user:"+u.Username] = true
	}
	for i, c := range cfg.Clients {
		switch {
		case c.ID == "":
			errs = append(errs, fmt.Errorf("clients[%d]: id is required", i))
		case seen["client:"+c.ID]:
			errs = append(errs, fmt.Errorf("clients[%d]: id %q is used twice", i, c.ID))
		case c.Type == "native" && (c.Secret != "" || c.ClientCredentials):
			errs = append(errs, fmt.Errorf("clients[%d] (%s): a native client is public: drop secret and client_credentials", i, c.ID))
		case c.Type == "web" && c.Secret == "":
			errs = append(errs, fmt.Errorf("clients[%d] (%s): a web client needs a secret", i, c.ID))
		case c.Type != "native" && c.Type != "web":
			errs = append(errs, fmt.Errorf("clients[%d] (%s): type %q is neither native nor web", i, c.ID, c.Type))
		}
		seen["client:"+c.ID] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return &cfg, lifetime, nil
}
