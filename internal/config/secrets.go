package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap/zapcore"
)

// This file keeps the config's secrets out of logs: upstream headers and
// env values, upstream OAuth client secrets and API keys. The YAML shape is
// unchanged (they stay plain strings); instead
//
//   - the types holding them (Upstream, UpstreamOAuth, APIKey) replace those
//     values by Redacted when logged as zap objects, encoded as JSON (which
//     is what zap.Any of a map or slice of them does) or formatted with
//     %v/%s, and
//   - Secrets lists the values, so that the gateway's logger can scrub any
//     that reach a log line some other way (a child printing its token on
//     stderr, an upstream echoing a header in an error body).

// Redacted replaces a secret wherever it would be shown.
const Redacted = "[redacted]"

// MinSecretLen is the shortest value Secrets reports: scrubbing shorter
// strings from logs would mangle ordinary words more than it protects.
const MinSecretLen = 8

// Secrets returns the secret values of c, longest first, without
// duplicates: values of upstream headers and env, upstream OAuth and
// introspection client secrets and API keys, each at least MinSecretLen bytes long. For a header
// value with an auth scheme ("Bearer TOKEN") the credential after the
// scheme is listed too.
func (c *Config) Secrets() []string {
	if c == nil {
		return nil
	}
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) >= MinSecretLen {
			out = append(out, s)
		}
	}
	for _, u := range c.Upstreams {
		if u == nil {
			continue
		}
		for _, v := range u.Headers {
			add(v)
			if _, cred, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
				add(cred)
			}
		}
		for _, v := range u.Env {
			add(v)
		}
		if u.OAuth != nil {
			add(u.OAuth.ClientSecret)
		}
		if u.Auth != nil && u.Auth.PerUser != nil {
			add(u.Auth.PerUser.ClientSecret)
		}
		if u.Auth != nil && u.Auth.TokenExchange != nil {
			add(u.Auth.TokenExchange.ClientSecret)
		}
	}
	if c.Auth != nil {
		if c.Auth.Introspection != nil {
			add(c.Auth.Introspection.ClientSecret)
		}
		for _, k := range c.Auth.APIKeys {
			add(k.Key)
		}
	}
	if c.Login != nil && c.Login.Provider != nil {
		add(c.Login.Provider.ClientSecret)
	}
	if c.Tracing != nil {
		for _, v := range c.Tracing.Headers {
			add(v)
			if _, cred, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
				add(cred)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	return slices.Compact(out)
}

// redactedMap logs a map's keys with every value Redacted.
type redactedMap map[string]string

func (m redactedMap) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for k := range m {
		enc.AddString(k, Redacted)
	}
	return nil
}

func redactString(s string) string {
	if s == "" {
		return ""
	}
	return Redacted
}

// MarshalLogObject logs the upstream with header and env values redacted.
func (u *Upstream) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if u == nil {
		return nil
	}
	if u.URL != "" {
		enc.AddString("url", u.URL)
	}
	enc.AddString("transport", u.Transport)
	if len(u.Headers) > 0 {
		_ = enc.AddObject("headers", redactedMap(u.Headers))
	}
	if u.OAuth != nil {
		_ = enc.AddObject("oauth", u.OAuth)
	}
	if u.Auth != nil && u.Auth.PerUser != nil {
		_ = enc.AddObject("auth.per_user", u.Auth.PerUser)
	}
	if len(u.Command) > 0 {
		_ = enc.AddArray("command", zapcore.ArrayMarshalerFunc(func(a zapcore.ArrayEncoder) error {
			for _, s := range u.Command {
				a.AppendString(s)
			}
			return nil
		}))
	}
	if len(u.Env) > 0 {
		_ = enc.AddObject("env", redactedMap(u.Env))
	}
	if len(u.InheritEnv) > 0 { // names only: what they hold is not logged
		_ = enc.AddArray("inherit_env", zapcore.ArrayMarshalerFunc(func(a zapcore.ArrayEncoder) error {
			for _, s := range u.InheritEnv {
				a.AppendString(s)
			}
			return nil
		}))
	}
	if u.Dir != "" {
		enc.AddString("dir", u.Dir)
	}
	enc.AddDuration("timeout", u.Timeout.D())
	enc.AddBool("stateful", u.Stateful)
	enc.AddBool("required", u.Required)
	return nil
}

// MarshalLogObject logs the OAuth settings with the client secret redacted.
func (o *UpstreamOAuth) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if o == nil {
		return nil
	}
	switch {
	case o.TokenURL != "":
		enc.AddString("token_url", o.TokenURL)
	case o.Issuer != "":
		enc.AddString("issuer", o.Issuer)
	default:
		enc.AddBool("discover", o.Discover)
	}
	enc.AddString("client_id", o.ClientID)
	enc.AddString("client_secret", redactString(o.ClientSecret))
	if o.ClientSecretFile != "" {
		enc.AddString("client_secret_file", o.ClientSecretFile)
	}
	return nil
}

// MarshalLogObject logs the API key's name and principal, never the key.
func (k APIKey) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("name", k.Name)
	enc.AddString("key", redactString(k.Key))
	if k.KeyFile != "" {
		enc.AddString("key_file", k.KeyFile)
	}
	if k.Principal != "" {
		enc.AddString("principal", k.Principal)
	}
	return nil
}

// String describes the API key without its secret (for %v and %s).
func (k APIKey) String() string {
	return "api key " + k.Name + " (key " + Redacted + ")"
}

// Redacted copies, for JSON and fmt. The conversions drop the methods, so
// that they do not recurse.
type (
	upstreamPlain Upstream
	oauthPlain    UpstreamOAuth
	apiKeyPlain   APIKey
	introPlain    Introspection
	perUserPlain  UpstreamPerUser
)

// MarshalJSON encodes the introspection settings with the client secret redacted.
func (in Introspection) MarshalJSON() ([]byte, error) {
	c := introPlain(in)
	c.ClientSecret = redactString(in.ClientSecret)
	return json.Marshal(c)
}

// String formats the introspection settings with the client secret redacted.
func (in Introspection) String() string {
	c := introPlain(in)
	c.ClientSecret = redactString(in.ClientSecret)
	return fmt.Sprintf("%+v", c)
}

// MarshalLogObject logs the introspection settings with the client secret redacted.
func (in *Introspection) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if in == nil {
		return nil
	}
	enc.AddString("url", in.URL)
	enc.AddString("client_id", in.ClientID)
	enc.AddString("client_secret", redactString(in.ClientSecret))
	return nil
}

func redactValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k := range out {
		out[k] = Redacted
	}
	return out
}

func (u Upstream) redacted() upstreamPlain {
	c := upstreamPlain(u)
	c.Headers, c.Env = redactValues(u.Headers), redactValues(u.Env)
	if u.OAuth != nil {
		o := u.OAuth.redacted()
		c.OAuth = (*UpstreamOAuth)(&o)
	}
	if u.Auth != nil && u.Auth.PerUser != nil {
		pu := u.Auth.PerUser.redacted()
		c.Auth = &UpstreamAuth{PerUser: (*UpstreamPerUser)(&pu)}
	}
	return c
}

func (o UpstreamPerUser) redacted() perUserPlain {
	c := perUserPlain(o)
	c.ClientSecret = redactString(o.ClientSecret)
	return c
}

// MarshalJSON encodes the per-user OAuth settings with the client secret redacted.
func (o UpstreamPerUser) MarshalJSON() ([]byte, error) { return json.Marshal(o.redacted()) }

// String formats the per-user OAuth settings with the client secret redacted.
func (o UpstreamPerUser) String() string { return fmt.Sprintf("%+v", o.redacted()) }

func (o UpstreamOAuth) redacted() oauthPlain {
	c := oauthPlain(o)
	c.ClientSecret = redactString(o.ClientSecret)
	return c
}

// MarshalJSON encodes the upstream with header and env values redacted.
func (u Upstream) MarshalJSON() ([]byte, error) { return json.Marshal(u.redacted()) }

// String formats the upstream with header and env values redacted.
func (u Upstream) String() string { return fmt.Sprintf("%+v", u.redacted()) }

// MarshalJSON encodes the OAuth settings with the client secret redacted.
func (o UpstreamOAuth) MarshalJSON() ([]byte, error) { return json.Marshal(o.redacted()) }

// String formats the OAuth settings with the client secret redacted.
func (o UpstreamOAuth) String() string { return fmt.Sprintf("%+v", o.redacted()) }

// MarshalJSON encodes the API key with the key redacted.
func (k APIKey) MarshalJSON() ([]byte, error) {
	c := apiKeyPlain(k)
	c.Key = redactString(k.Key)
	return json.Marshal(c)
}

// MarshalLogObject logs the per-user OAuth settings with the client secret
// redacted.
func (o *UpstreamPerUser) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if o == nil {
		return nil
	}
	if o.Issuer != "" {
		enc.AddString("issuer", o.Issuer)
	} else {
		enc.AddBool("discover", o.Discover)
	}
	switch {
	case o.ClientID != "":
		enc.AddString("client_id", o.ClientID)
	case o.ClientMetadataURL != "":
		enc.AddString("client_metadata_url", o.ClientMetadataURL)
	default:
		enc.AddBool("dynamic_registration", o.DynamicRegistration)
	}
	enc.AddString("client_secret", redactString(o.ClientSecret))
	if o.ClientSecretFile != "" {
		enc.AddString("client_secret_file", o.ClientSecretFile)
	}
	return nil
}
