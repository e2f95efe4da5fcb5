package main

import (
	"context"
	"fmt"

	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// users is the storage.UserStore of the configured users.
type users map[string]*storage.User

func (u users) GetUserByID(id string) *storage.User { return u[id] }

func (u users) GetUserByUsername(name string) *storage.User {
	for _, user := range u {
		if user.Username == name {
			return user
		}
	}
	return nil
}

// ExampleClientID names the example's JWT-profile service user, which this
// OP does not use.
func (u users) ExampleClientID() string { return "service" }

// store is the example storage with what the tests need changed: the
// configured clients (JWT access tokens, so a resource server can verify
// them against the JWKS; client credentials for web clients that ask for
// it), a token-exchange policy that neither panics on a non-user subject
// nor defaults to issuing refresh tokens, an act claim for delegation, and
// a cap on token lifetimes.
type store struct {
	*storage.Storage
	users       users
	credentials map[string]bool // web clients allowed client_credentials
	lifetime    time.Duration
	now         func() time.Time
}

func newStore(cfg *Config, lifetime time.Duration) *store {
	us := users{}
	for _, u := range cfg.Users {
		us[u.ID] = &storage.User{
			ID: u.ID, Username: u.Username, Password: u.Password,
			FirstName: u.Username, Email: u.Email, EmailVerified: u.Email != "",
			PreferredLanguage: language.English, IsAdmin: u.MayBeExchanged,
		}
	}
	clients := map[string]*storage.Client{}
	credentials := map[string]bool{}
	for _, c := range cfg.Clients {
		if c.Type == "native" {
			clients[c.ID] = storage.NativeClient(c.ID, c.RedirectURIs...)
		} else {
			clients[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURIs...)
			credentials[c.ID] = c.ClientCredentials
		}
	}
	return &store{
		Storage:     storage.NewStorageWithClients(us, clients),
		users:       us,
		credentials: credentials,
		lifetime:    lifetime,
		now:         time.Now,
	}
}

// client is a registered client as the OP sees it: JWT access tokens,
// every scope allowed (the tests name upstream scopes the example does
// not know), and client_credentials where configured.
type client struct {
	op.Client
	credentials bool
}

func (c client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c client) IsScopeAllowed(string) bool          { return true }

func (c client) GrantTypes() []oidc.GrantType {
	gt := c.Client.GrantTypes()
	if c.credentials {
		gt = append(append([]oidc.GrantType(nil), gt...), oidc.GrantTypeClientCredentials)
	}
	return gt
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{Client: c, credentials: s.credentials[id]}, nil
}

// ClientCredentials authenticates a web client configured with
// client_credentials (the example only knows a fixed service user).
func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if !s.credentials[id] {
		return nil, fmt.Errorf("client %q may not use client_credentials", id)
	}
	if err := s.Storage.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return s.GetClientByClientID(ctx, id)
}

func (s *store) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	if !s.credentials[id] {
		return nil, fmt.Errorf("client %q may not use client_credentials", id)
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{id}, Scopes: scopes}, nil
}

// ValidateTokenExchangeRequest allows an exchange when an actor token is
// presented (delegation: the act claim names the actor) or the subject
// user may be impersonated; anything else is invalid_grant naming why.
func (s *store) ValidateTokenExchangeRequest(_ context.Context, req op.TokenExchangeRequest) error {
	if req.GetRequestedTokenType() == "" {
		req.SetRequestedTokenType(oidc.AccessTokenType)
	}
	if req.GetExchangeActor() == "" {
		u := s.users[req.GetExchangeSubject()]
		if u == nil || !u.IsAdmin {
			return oidc.ErrInvalidGrant().WithDescription("subject %q may not be exchanged without an actor token", req.GetExchangeSubject())
		}
	}
	req.SetCurrentScopes(req.GetScopes())
	return nil
}

func (s *store) GetPrivateClaimsFromTokenExchangeRequest(ctx context.Context, req op.TokenExchangeRequest) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromTokenExchangeRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	if actor := req.GetExchangeActor(); actor != "" {
		if claims == nil {
			claims = map[string]any{}
		}
		claims["act"] = map[string]any{"sub": actor}
	}
	return claims, nil
}

// capped shortens an expiry to the configured lifetime.
func (s *store) capped(exp time.Time) time.Time {
	if limit := s.now().Add(s.lifetime); exp.After(limit) {
		return limit
	}
	return exp
}

func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	return id, s.capped(exp), err
}

func (s *store) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	id, refresh, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
	return id, refresh, s.capped(exp), err
}
