package core

import (
	"sync"

	"github.com/mcpgw/mcpgw/internal/audit"
	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/catalog"
	"github.com/mcpgw/mcpgw/internal/policy"
)

// Generation is what one config generation decides about serving requests:
// its routes and the authenticator, policy, limiter, pinner and audit log
// they are judged by. A reload makes a new one; a request is served wholly
// by one generation.
type Generation struct {
	Routes []*Route // in config order
	ByPath map[string]*Route

	Auth    *auth.Authenticator // nil: no authentication
	Policy  *policy.Policy      // nil: all allowed (guard.go)
	Limiter *policy.Limiter     // nil: no rate limits
	Pinner  *policy.Pinner      // nil: pinning off
	Audit   *audit.Logger       // nil: audit off (audit.go)
	// PrivateLists: lists depend on who asks (auth or policy rules), so
	// 2026 list results are cacheScope private.
	PrivateLists bool
	MaxBody      int64 // max_body_bytes
	Limits       Limits
}

// Route is one configured downstream endpoint in one generation.
type Route struct {
	Path     string
	View     *catalog.View
	Resource string   // canonical URI (token audience), when auth is on
	Scopes   []string // every caller needs these (auth.required_scopes + the route's)
	Gen      *Generation

	chain chain // the request path's stages for this route, composed once (chain.go)
}

// chain is a route's composed request path (chain.go).
type chain struct {
	once  sync.Once
	serve Next
}
