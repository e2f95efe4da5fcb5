package credentials

// Caller headers forwarded by explicit opt-in (upstreams.NAME.
// forward_headers). The edge reads the configured headers of each request
// into its principal (auth.Principal.WithForwarded); an upstream that
// forwards any is per caller like an acting-for one (ActsForCaller: a
// connection per downstream session, or per principal for stateless
// requests), and its connection's transport (sourceTransport) sets them on
// every request from that connection's own principal only — the request's
// own values when its context carries the same principal, else the
// freshest the principal called with. Values are never logged.

import (
	"context"
	"net/http"

	"github.com/mcpgw/mcpgw/internal/auth"
)

// forwardedSource is the Source of an upstream whose only per-caller
// credential is what its callers' forwarded headers carry: no token.
type forwardedSource struct{}

func (forwardedSource) Kind() Kind { return KindForwarded }
func (forwardedSource) Token(context.Context, Subject) (string, error) {
	return "", nil
}
func (forwardedSource) Refused(context.Context, Subject, string) {}

// forwardHeaders sets r's forwarded headers from the connection's subject:
// the values of the request's own principal when it is the connection's
// (a call's context carries it), else the subject's latest. Each
// configured header is replaced whole, so a caller that stopped sending
// one sends nothing.
func (t *sourceTransport) forwardHeaders(r *http.Request, sub Subject) {
	if len(t.forward) == 0 {
		return
	}
	p := sub.Principal
	if own := auth.FromContext(r.Context()); own != nil && own.Key() == sub.Key() {
		p = own
	}
	for _, f := range t.forward {
		as := f.Upstream()
		r.Header.Del(as)
		for _, v := range p.Forwarded(http.CanonicalHeaderKey(f.Name)) {
			r.Header.Add(as, v)
		}
	}
}
