package auth

import (
	"encoding/json"
	"strings"
)

// ProtectedResourceMetadata is the RFC 9728 document of one resource.
type ProtectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// Metadata returns the Protected Resource Metadata of the route at path
// whose callers need scopes; nil when there is no issuer to point
// clients at.
func (a *Authenticator) Metadata(path string, scopes []string) *ProtectedResourceMetadata {
	if len(a.issuers) == 0 {
		return nil
	}
	return &ProtectedResourceMetadata{
		Resource:               a.Resource(path),
		AuthorizationServers:   a.Issuers(),
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
	}
}

// MetadataJSON is Metadata encoded.
func (a *Authenticator) MetadataJSON(path string, scopes []string) []byte {
	m := a.Metadata(path, scopes)
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}

// Challenge is the WWW-Authenticate value answering err on the route at
// path, whose callers need scopes (RFC 6750 section 3, RFC 9728 section
// 5.1): where the metadata is, the error code when credentials were given,
// and the scopes to ask for.
func (a *Authenticator) Challenge(err *Error, path string, scopes []string) string {
	var params []string
	if u := a.MetadataURL(path); u != "" {
		params = append(params, `resource_metadata="`+u+`"`)
	} else {
		params = append(params, `realm="mcpgw"`)
	}
	if code := err.Code(); code != "" {
		params = append(params, `error="`+code+`"`)
		if err.Detail != "" {
			params = append(params, `error_description="`+quoteDetail(err.Detail)+`"`)
		}
	}
	if err.Reason == InsufficientScope {
		scopes = err.Scopes
	}
	if len(scopes) > 0 {
		params = append(params, `scope="`+strings.Join(scopes, " ")+`"`)
	}
	return "Bearer " + strings.Join(params, ", ")
}
