package gateway

import (
	"context"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/credentials/peruser"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/router"
	"github.com/mcpgw/mcpgw/internal/router/sessions"
)

// perUser holds the per-user authorization sources of the upstreams with
// auth.per_user (package peruser), built once at start: the host asks it
// for their credentials.Source, the router serves their pages, and a
// finished flow tells the router (notifications/elicitation/complete).
type perUser struct {
	sources map[string]*peruser.Source
	regs    []*peruser.Registrations
	rt      atomic.Pointer[router.Router]
}

// setKeys rekeys every source and registration store (a reload reread the
// session key ring).
func (p *perUser) setKeys(keys [][]byte) error {
	for _, s := range p.sources {
		if err := s.SetKeys(keys); err != nil {
			return err
		}
	}
	for _, r := range p.regs {
		if err := r.SetKeys(keys); err != nil {
			return err
		}
	}
	return nil
}

// newPerUser builds the sources of cfg's per_user upstreams.
// now is the tokens' clock (nil: time.Now).
// browsers is the login server's browser session (nil without login:),
// which binds each start link to its user's browser.
func newPerUser(cfg *config.Config, keys [][]byte, sh *shared, m *metrics.Metrics, log *zap.Logger, now func() time.Time, browsers peruser.BrowserUsers) (*perUser, error) {
	p := &perUser{sources: map[string]*peruser.Source{}}
	var pm *peruser.Metrics
	for _, name := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
		u := cfg.Upstreams[name]
		if u == nil || u.Auth == nil || u.Auth.PerUser == nil {
			continue
		}
		if pm == nil {
			var reg prometheus.Registerer
			if r := m.Registry(); r != nil {
				reg = r
			}
			pm = peruser.NewMetrics(reg)
		}
		pu := u.Auth.PerUser
		l := log.Named("peruser").With(zap.String("upstream", name))
		o := peruser.Options{
			Upstream: name, PublicURL: cfg.PublicURL, Keys: keys,
			LinkLifetime: pu.LinkLifetime.D(), MaxLinksPerPrincipal: pu.MaxLinksPerPrincipal, Logger: l, Metrics: pm, Clock: now, Browser: browsers,
			OnComplete: func(id string) {
				if rt := p.rt.Load(); rt != nil {
					rt.ElicitationComplete(id)
				}
			},
		}
		var regs peruser.Backend // dynamic registrations, beside the tokens
		switch {
		case pu.Store.Redis:
			if sh.client == nil {
				return nil, fmt.Errorf("upstreams.%s.auth.per_user.store.redis needs sessions.redis", name)
			}
			prefix := cfg.Sessions.Redis.KeyPrefix
			if prefix == "" {
				prefix = config.DefaultRedisKeyPrefix
			}
			o.Backend = peruser.NewRedis(sh.client, prefix, name, pu.MaxTokens)
			o.Once = peruser.NewRedisOnce(sh.client, prefix)
			regs = peruser.NewRedis(sh.client, prefix, name+".registrations", maxRegistrations)
		default:
			b, err := peruser.OpenFile(pu.Store.File, pu.MaxTokens, now)
			if err != nil {
				return nil, fmt.Errorf("upstreams.%s.auth.per_user.store: %w", name, err)
			}
			o.Backend = b
			if regs, err = peruser.OpenFile(strings.TrimSuffix(pu.Store.File, ".json")+".registrations.json", maxRegistrations, now); err != nil {
				return nil, fmt.Errorf("upstreams.%s.auth.per_user.store: %w", name, err)
			}
		}
		rs, err := peruser.NewRegistrations(regs, keys, l)
		if err != nil {
			return nil, err
		}
		p.regs = append(p.regs, rs)
		if o.Client, err = peruser.NewOAuthClient(name, u.URL, pu, rs, nil, log.Named("peruser"), now); err != nil {
			return nil, err
		}
		src, err := peruser.New(o)
		if err != nil {
			return nil, err
		}
		p.sources[name] = src
		l.Info("per-user authorization on", zap.String("redirect_uri", src.RedirectURI()))
	}
	return p, nil
}

// maxRegistrations bounds an upstream's stored dynamic registrations (one
// per authorization server it names, and redirect URI).
const maxRegistrations = 64

// source is the host's Options.CredentialSource.
func (p *perUser) source(_ context.Context, name string, u *config.Upstream) (credentials.Source, error) {
	if u.Auth == nil || u.Auth.PerUser == nil {
		return nil, nil
	}
	if s := p.sources[name]; s != nil {
		return s, nil
	}
	// Fail closed: a per_user upstream a reload added has no pages or
	// store yet.
	return nil, fmt.Errorf("auth.per_user was added by a config reload; restart mcpgw to serve its authorization pages and token store")
}

// RevokeTokens drops per-user tokens of upstream from the store cfg
// configures for it, as an administrator (mcpgw tokens revoke): the
// principal's (as logged: "SUB@ISSUER" or "apikey:NAME"), or with all
// every principal's. A running gateway sees it on its next request (the
// file is locked and re-read; Redis is shared). It returns how many were
// dropped.
func RevokeTokens(ctx context.Context, cfg *config.Config, upstream, principal string, all bool) (int, error) {
	u := cfg.Upstreams[upstream]
	if u == nil || u.Auth == nil || u.Auth.PerUser == nil {
		var names []string
		for _, n := range slices.Sorted(maps.Keys(cfg.Upstreams)) {
			if x := cfg.Upstreams[n]; x != nil && x.Auth != nil && x.Auth.PerUser != nil {
				names = append(names, n)
			}
		}
		return 0, fmt.Errorf("upstream %q has no auth.per_user; upstreams with per-user tokens: %v", upstream, names)
	}
	pu := u.Auth.PerUser
	var b peruser.Backend
	if pu.Store.Redis {
		o, err := redisOptions(cfg.Sessions.Redis)
		if err != nil {
			return 0, err
		}
		client := redis.NewUniversalClient(o)
		defer client.Close()
		prefix := cfg.Sessions.Redis.KeyPrefix
		if prefix == "" {
			prefix = config.DefaultRedisKeyPrefix
		}
		b = peruser.NewRedis(client, prefix, upstream, pu.MaxTokens)
	} else {
		fb, err := peruser.OpenFile(pu.Store.File, pu.MaxTokens, nil)
		if err != nil {
			return 0, err
		}
		b = fb
	}
	if all {
		return b.Clear(ctx)
	}
	key, err := peruser.PrincipalKey(principal)
	if err != nil {
		return 0, err
	}
	ring, err := perUserKeyRing(cfg)
	if err != nil {
		return 0, err
	}
	keys, err := peruser.StoreKeys(ring, upstream, key)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys { // wherever the record is: under any ring key, or unkeyed
		ok, err := b.Delete(ctx, k)
		if err != nil {
			return n, err
		}
		if ok {
			n = 1
		}
	}
	return n, nil
}

// perUserKeyRing reads sessions.key_file, which per_user requires (config
// validation): the store's keys are HMACs under it.
func perUserKeyRing(cfg *config.Config) ([][]byte, error) {
	if cfg.Sessions == nil || cfg.Sessions.KeyFile == "" {
		return nil, fmt.Errorf("per-user tokens are kept under keys made with sessions.key_file; set it")
	}
	data, err := os.ReadFile(cfg.Sessions.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("sessions.key_file: %w", err)
	}
	keys, err := sessions.ParseSessionKeys(data)
	if err != nil {
		return nil, fmt.Errorf("sessions.key_file %s: %w", cfg.Sessions.KeyFile, err)
	}
	return keys, nil
}

// perUserChanges names the per_user sections a reload would change: their
// sources (store, pages, client) are built at start, so a change needs a
// restart, as does public_url, which their links and redirect URIs use.
func perUserChanges(old, next *config.Config) []string {
	var keys []string
	perUser := func(c *config.Config, name string) *config.UpstreamPerUser {
		if u := c.Upstreams[name]; u != nil && u.Auth != nil {
			return u.Auth.PerUser
		}
		return nil
	}
	used := false
	names := slices.Sorted(maps.Keys(old.Upstreams))
	for n := range next.Upstreams {
		if _, ok := old.Upstreams[n]; !ok {
			names = append(names, n)
		}
	}
	for _, n := range names {
		was, now := perUser(old, n), perUser(next, n)
		used = used || was != nil || now != nil
		if !reflect.DeepEqual(was, now) {
			keys = append(keys, "upstreams."+n+".auth.per_user")
		}
	}
	if used && old.PublicURL != next.PublicURL {
		keys = append(keys, "public_url (per-user authorization links use it)")
	}
	return keys
}
