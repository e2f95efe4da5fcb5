package credentials

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// TestIDJAGExchange: with token_exchange.id_jag the caller's ID token is
// exchanged at the IdP for an ID-JAG whose audience is the upstream's
// authorization server, which is then redeemed there with the JWT bearer
// grant and the gateway's client; the resulting token is what goes
// upstream, cached per principal, and a refusal at the authorization
// server names it.
func TestIDJAGExchange(t *testing.T) {
	var mu sync.Mutex
	var log []string
	refuse := false
	as := httptest.NewServer(nil)
	t.Cleanup(as.Close)
	as.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/.well-known/oauth-authorization-server" {
			fmt.Fprintf(w, `{"issuer":%q,"token_endpoint":%q}`, as.URL, as.URL+"/token")
			return
		}
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		mu.Lock()
		defer mu.Unlock()
		log = append(log, fmt.Sprintf("AS %s:%s %s", id, secret, r.PostForm.Encode()))
		if refuse {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"app not approved"}`)
			return
		}
		fmt.Fprintf(w, `{"access_token":"up-for-%s","token_type":"Bearer","expires_in":3600}`, r.PostForm.Get("assertion"))
	})
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		log = append(log, "IdP "+r.PostForm.Encode())
		mu.Unlock()
		fmt.Fprintf(w, `{"access_token":"jag-%s","issued_token_type":%q,"token_type":"N_A","expires_in":300}`, r.PostForm.Get("subject_token"), config.TokenTypeIDJAG)
	}))
	t.Cleanup(idp.Close)
	s := testExchange(t, idp.URL, config.UpstreamTokenExchange{
		RequestedTokenType: config.TokenTypeIDJAG, SubjectTokenType: config.TokenTypeIDToken, Resource: "https://jira.example.com/mcp",
		IDJAG: &config.UpstreamIDJAG{Issuer: as.URL, ClientID: "gw-at-jira", ClientSecret: "jira-secret", AuthMethod: config.AuthMethodBasic},
	})
	for range 2 {
		tok, err := s.Token(t.Context(), subject("alice"))
		if err != nil || tok != "up-for-jag-downstream-alice" {
			t.Fatalf("Token = %q, %v; want the authorization server's token for alice's ID-JAG", tok, err)
		}
	}
	mu.Lock()
	want := []string{
		"IdP audience=" + strings.ReplaceAll(as.URL, ":", "%3A") + "&grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange" +
			"&requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid-jag&resource=https%3A%2F%2Fjira.example.com%2Fmcp" +
			"&subject_token=downstream-alice&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aid_token",
		"AS gw-at-jira:jira-secret assertion=jag-downstream-alice&grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer",
	}
	want[0] = strings.ReplaceAll(want[0], "//", "%2F%2F")
	if fmt.Sprint(log) != fmt.Sprint(want) {
		t.Errorf("requests (one exchange, then cached):\n got %q\nwant %q", log, want)
	}
	refuse = true
	mu.Unlock()
	_, err := s.Token(t.Context(), subject("bob"))
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") || !strings.Contains(err.Error(), as.URL+"/token") || strings.Contains(err.Error(), "jag-") {
		t.Errorf("refused at the authorization server: %v; want its error naming it, never the ID-JAG", err)
	}
}
