package config

import (
	"net/url"
	"slices"
)

// Redacted returns a copy of c to show (the admin listener's
// /status/config): every secret the config holds — upstream header and env
// values, OAuth and introspection client secrets, API keys, tracing header
// values, credentials in URLs — is replaced by Redacted. c is unchanged.
func (c *Config) Redacted() *Config {
	if c == nil {
		return nil
	}
	out := *c
	out.Upstreams = make(map[string]*Upstream, len(c.Upstreams))
	for name, u := range c.Upstreams {
		if u == nil {
			out.Upstreams[name] = nil
			continue
		}
		cu := *u
		cu.URL = redactURL(u.URL)
		cu.Proxy = redactURL(u.Proxy) // user:password@ of the proxy
		cu.Headers, cu.Env = redactValues(u.Headers), redactValues(u.Env)
		cu.Command = slices.Clone(u.Command)
		if u.OAuth != nil {
			o := *u.OAuth
			o.ClientSecret = redactString(o.ClientSecret)
			cu.OAuth = &o
		}
		out.Upstreams[name] = &cu
	}
	if c.Auth != nil {
		a := *c.Auth
		a.APIKeys = slices.Clone(c.Auth.APIKeys)
		for i := range a.APIKeys {
			a.APIKeys[i].Key = redactString(a.APIKeys[i].Key)
		}
		if c.Auth.Introspection != nil {
			in := *c.Auth.Introspection
			in.ClientSecret = redactString(in.ClientSecret)
			a.Introspection = &in
		}
		out.Auth = &a
	}
	if c.Tracing != nil {
		t := *c.Tracing
		t.Headers = redactValues(c.Tracing.Headers)
		t.Endpoint = redactURL(c.Tracing.Endpoint)
		out.Tracing = &t
	}
	if c.Sessions != nil && c.Sessions.AdvertiseURL != "" {
		s := *c.Sessions
		s.AdvertiseURL = redactURL(s.AdvertiseURL)
		out.Sessions = &s
	}
	return &out
}

// redactURL hides a password in a URL's userinfo (config dumps and error
// messages); a URL that does not parse is not shown at all, since where its
// password would be cannot be told.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); !has {
		u.User = url.User(Redacted)
		return u.String()
	}
	return u.Redacted()
}
