package auth

import (
	"slices"
	"testing"
)

// TestAcceptsAudienceAgreesWithResourceAudiences: the cache's check of a
// token's audience accepts exactly the audiences a full check does.
func TestAcceptsAudienceAgreesWithResourceAudiences(t *testing.T) {
	for _, publicURL := range []string{"https://mcp.example.com/", "https://mcp.example.com"} {
		a := &Authenticator{publicURL: publicURL}
		for _, configured := range []string{"", "mcpgw"} {
			for _, resource := range []string{"https://mcp.example.com/mcp", "https://mcp.example.com/"} {
				want := a.resourceAudiences(configured, resource)
				for _, aud := range []string{"", "mcpgw", "https://mcp.example.com", "https://mcp.example.com/", "https://mcp.example.com/mcp", "https://mcp.example.com/admin", "https://other.example.com"} {
					if got := a.acceptsAudience(configured, resource, aud); got != slices.Contains(want, aud) {
						t.Errorf("public_url %s, audience %q, resource %s: accepts(%q) = %v, resourceAudiences %v", publicURL, configured, resource, aud, got, want)
					}
				}
			}
		}
	}
}
