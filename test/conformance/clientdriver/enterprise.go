package main

// Enterprise-Managed Authorization (auth/enterprise-managed-authorization):
// the caller signed in at the enterprise IdP and calls the gateway with
// the ID token the scenario hands out (idp_id_token); the gateway exchanges
// it at the IdP for an ID-JAG (upstreams.NAME.auth.token_exchange with
// id_jag) and redeems that at the upstream's authorization server.
//
// The gateway must first accept the ID token as the caller's credential.
// The suite's IdP publishes no keys, so the driver stands in for the
// enterprise's token validation with an RFC 7662 introspection endpoint
// (auth.introspection) that knows exactly that token: active, its subject
// the scenario's user. Everything the scenario checks — the exchange at
// the IdP and the JWT bearer grant — is the gateway's own.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// enterprise is the run's introspection endpoint and config.
type enterprise struct {
	srv  *http.Server
	addr string
}

const introspectionSecret = "conformance-introspection-secret"

// enterpriseScenario reports whether sc runs as Enterprise-Managed
// Authorization.
func (sc scenario) enterpriseScenario() bool {
	return sc.name == "auth/enterprise-managed-authorization" && sc.ctx.IDPIDToken != ""
}

// startEnterprise serves the introspection endpoint for the scenario's ID
// token.
func startEnterprise(sc scenario) (*enterprise, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if id, secret, ok := r.BasicAuth(); !ok || id != "mcpgw" || secret != introspectionSecret || r.PostForm.Get("token") != sc.ctx.IDPIDToken {
			fmt.Fprint(w, `{"active":false}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"active": true, "sub": "demo-user@example.com", "iss": sc.ctx.IDPIssuer,
			"aud": "mcpgw-conformance", "client_id": sc.ctx.IDPClientID, "exp": time.Now().Add(time.Hour).Unix(),
		})
	})
	e := &enterprise{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: l.Addr().String()}
	go func() { _ = e.srv.Serve(l) }()
	return e, nil
}

// globals is the top of the config: the caller authenticates with the ID
// token, checked by the introspection endpoint.
func (e *enterprise) globals() string {
	return fmt.Sprintf("listen: 127.0.0.1:0\nauth:\n  introspection:\n    url: http://%s/introspect\n    client_id: mcpgw\n    client_secret: %q\n    audience: mcpgw-conformance\npolicy:\n  default: allow\n", e.addr, introspectionSecret)
}

// upstreamAuth is the upstream's token_exchange with id_jag, as an
// operator would write it: the IdP's token endpoint and the gateway's
// client there, the upstream's authorization server discovered (its
// issuer is the ID-JAG's audience) and the gateway's client there.
func (sc scenario) enterpriseAuth() string {
	var b strings.Builder
	fmt.Fprintf(&b, "    auth:\n      token_exchange:\n        token_url: %q\n        client_id: %q\n        client_secret: \"idp-client-secret\"\n", sc.ctx.IDPTokenEndpoint, sc.ctx.IDPClientID)
	fmt.Fprintf(&b, "        id_jag:\n          discover: true\n          client_id: %q\n          client_secret: %q\n          allow_addresses: [127.0.0.0/8, \"::1\"]\n", sc.ctx.ClientID, sc.ctx.ClientSecret)
	return b.String()
}
