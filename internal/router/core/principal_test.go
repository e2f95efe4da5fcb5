package core

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/principal"
)

// The policy judges, and the rate limits count, the very principal
// authentication made — not a copy missing fields — so its key is the
// one sessions and per-user tokens are bound by.
func TestPolicyPrincipalIsTheAuthenticatedOne(t *testing.T) {
	for _, p := range []*auth.Principal{
		{Subject: "alice", Issuer: "https://idp.example.com", ClientID: "app", Groups: []string{"eng"}, Scopes: []string{"s"},
			Expiry: time.Unix(1e9, 0), Claims: map[string]any{"dept": "r"}},
		{Subject: "CN1", Certificate: "common_name", Groups: []string{"ops"}, PreparedClaims: principal.NewClaims(nil)},
		{Subject: "ci-bot", APIKey: "ci"},
	} {
		p.SetBearerToken("tok")
		got := policyPrincipal(auth.WithPrincipal(context.Background(), p))
		if got.Key() != p.Key() {
			t.Errorf("%s: the policy keys the principal %q, sessions %q", p, got.Key(), p.Key())
		}
		if !reflect.DeepEqual(&got, p) {
			t.Errorf("%s: the policy sees %+v, authentication made %+v", p, got, *p)
		}
	}
	if got := policyPrincipal(context.Background()); got.Key() != "" || got.String() != "anonymous" {
		t.Errorf("no principal: %q (%s), want anonymous", got.Key(), got.String())
	}
}
