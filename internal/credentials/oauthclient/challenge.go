package oauthclient

import "strings"

// Challenge is what a Bearer WWW-Authenticate challenge says (RFC 6750
// section 3, RFC 9728 section 5.1).
type Challenge struct {
	Scopes           []string // scope, split on spaces
	ResourceMetadata string   // resource_metadata: where the protected resource metadata is
	Error            string   // error, e.g. invalid_token or insufficient_scope
}

// InsufficientScope reports whether the challenge asks for more scope
// (a 403 step-up, RFC 6750 section 3.1).
func (c Challenge) InsufficientScope() bool { return strings.EqualFold(c.Error, "insufficient_scope") }

// ParseChallenge reads the Bearer challenge among the WWW-Authenticate
// values (several challenges may share one value, comma-separated). Other
// schemes' parameters are skipped; a malformed value yields what could be
// read, never a panic (FuzzParseChallenge).
func ParseChallenge(values []string) Challenge {
	var ch Challenge
	for _, v := range values {
		scheme := ""
		for i := 0; i < len(v); {
			for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == ',') {
				i++
			}
			j := i
			for j < len(v) && v[j] != ' ' && v[j] != '\t' && v[j] != ',' && v[j] != '=' {
				j++
			}
			name := v[i:j]
			k := j
			for k < len(v) && (v[k] == ' ' || v[k] == '\t') {
				k++
			}
			if k >= len(v) || v[k] != '=' {
				// A token without "=" starts a new challenge (or is a token68).
				if name != "" {
					scheme = name
				}
				i = k
				continue
			}
			k++
			for k < len(v) && (v[k] == ' ' || v[k] == '\t') {
				k++
			}
			value := ""
			if k < len(v) && v[k] == '"' {
				var b strings.Builder
				k++
				for k < len(v) && v[k] != '"' {
					if v[k] == '\\' && k+1 < len(v) {
						k++
					}
					b.WriteByte(v[k])
					k++
				}
				value, i = b.String(), k+1
			} else {
				e := k
				for e < len(v) && v[e] != ',' && v[e] != ' ' && v[e] != '\t' {
					e++
				}
				value, i = v[k:e], e
			}
			// A DPoP challenge (RFC 9449 section 7.1) carries the same
			// parameters for a DPoP-bound client.
			if !strings.EqualFold(scheme, "Bearer") && !strings.EqualFold(scheme, "DPoP") {
				continue
			}
			switch strings.ToLower(name) {
			case "scope":
				ch.Scopes = strings.Fields(value)
			case "resource_metadata":
				ch.ResourceMetadata = value
			case "error":
				ch.Error = value
			}
		}
	}
	return ch
}
