package config

import (
	"bytes"
	"net/url"
	"slices"

	"gopkg.in/yaml.v3"
)

// Redacted returns a copy of c to show (the admin listener's
// /status/config): every secret the config holds — upstream header and env
// values, OAuth and introspection client secrets, API keys, tracing header
// values, credentials in URLs — is replaced by Redacted, and the stateful
// bounds of an upstream that is not stateful (defaulted, but refused when
// written) are cleared. c is unchanged.
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
		if !u.Stateful {
			// Defaulted, but refused when written without stateful: true.
			cu.MaxSessions, cu.MaxSessionsPerPrincipal = 0, 0
		}
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
	if c.Login != nil && c.Login.Provider != nil {
		l, p := *c.Login, *c.Login.Provider
		p.ClientSecret = redactString(p.ClientSecret)
		l.Provider = &p
		out.Login = &l
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

// ShowYAML is c as the admin listener's /status/config shows it: Redacted,
// as YAML that validate accepts. Members with no value (null, "") are left
// out: they mean "unset", which the loader reads as the default, and some
// are refused when written (url: "" beside a command). Empty lists and
// mappings stay: an explicit [] can differ from the default
// (audit.redact_fields: [] redacts nothing).
func (c *Config) ShowYAML() ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(c.Redacted()); err != nil {
		return nil, err
	}
	dropEmpty(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// dropEmpty removes the mapping members of n (recursively) whose value is
// empty, as ShowYAML describes.
func dropEmpty(n *yaml.Node) {
	for _, c := range n.Content {
		dropEmpty(c)
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !emptyNode(n.Content[i+1]) {
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
	}
	n.Content = kept
}

func emptyNode(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Tag == "!!null" || n.Tag == "!!str" && n.Value == "")
}
