package edge

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// Checks are the tests every request passes before anything else: Host on a
// loopback listener (DNS-rebinding protection) and Origin against
// allowed_origins.
type Checks struct {
	origins map[string]bool
	hosts   []string // allowed Host names on a loopback listener; nil = any
}

// NewChecks makes the checks of a listener at listen (host:port) whose
// canonical URL is publicURL, serving web apps from allowedOrigins.
func NewChecks(listen, publicURL string, allowedOrigins []string) *Checks {
	c := &Checks{origins: map[string]bool{}, hosts: allowedHosts(listen, publicURL)}
	for _, o := range allowedOrigins {
		c.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return c
}

// allowedHosts returns the Host names accepted when the listener is on
// loopback (DNS-rebinding protection), or nil when any Host is fine.
func allowedHosts(listen, publicURL string) []string {
	h, _, err := net.SplitHostPort(listen)
	if err != nil || !isLoopbackName(h) {
		return nil
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	return hosts
}

func isLoopbackName(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Middleware refuses a request that fails the checks, with 403 and the
// reason; log is the fallback for requests without their own logger.
func (c *Checks) Middleware(log *zap.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return c.handler(log, next) }
}

func (c *Checks) handler(log *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.hosts != nil {
			h := r.Host
			if hn, _, err := net.SplitHostPort(h); err == nil {
				h = hn
			}
			h = strings.Trim(strings.ToLower(h), "[]")
			if !slices.Contains(c.hosts, h) && !isLoopbackIP(h) {
				Logger(r.Context(), log).Warn("refused request with a non-loopback Host on a loopback listener", zap.String("host", r.Host))
				Error(w, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "Host "+r.Host+" is not allowed on this loopback listener (DNS-rebinding protection); set public_url to serve another name")
				return
			}
		}
		if o := r.Header.Get("Origin"); o != "" && !c.originAllowed(o) {
			Logger(r.Context(), log).Warn("refused request from an Origin not in allowed_origins", zap.String("origin", o))
			Error(w, http.StatusForbidden, jsonrpc.CodeInvalidRequest, "Origin "+o+" is not allowed; add it to allowed_origins to serve this web app")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originAllowed accepts the configured origins and, on a loopback
// listener, pages served from loopback themselves (a local app talking to a
// local gateway); a page from any other site is refused.
func (c *Checks) originAllowed(origin string) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if c.origins[o] {
		return true
	}
	if c.hosts == nil {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLoopbackName(u.Hostname())
}

func isLoopbackIP(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
