package streamable

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
)

// A bridged call lives on the replica that parked it, but a 2026-07-28
// client is stateless: its retry goes wherever the load balancer sends it.
// With sessions.advertise_url, the requestState names the replica holding
// the call (signed with the replicas' shared key, so a client cannot point
// it elsewhere), and a replica that receives the retry forwards it there
// once — the forwarded request carries forwardedHeader and is never passed
// on again. The client's own headers go along: the holding replica
// authenticates the caller itself, and the call stays bound to its
// principal. Nothing leaves the gateway's replicas.

// internal/auth (dpop.go) names it too: a DPoP proof it carries was
// recorded by the forwarding replica.
const forwardedHeader = "Mcp-Gateway-Forwarded"

// forwardTransport talks to the other replicas directly: never through an
// HTTP proxy from the environment, which would see the client's credentials.
func forwardTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return t
}

// forwardRetry passes a retry to the replica at home and streams its answer
// back; an error (nothing written yet) when it cannot.
func (t *Transport) forwardRetry(w http.ResponseWriter, r *http.Request, home string, msg *jsonrpc.Message) *jsonrpc.Error {
	if r.Header.Get(forwardedHeader) != "" {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid requestState: its call waits on the replica at %s, and this request was already forwarded once", home)
	}
	target, err := url.Parse(home)
	if err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: forwarding to %s: %v", home, err)
	}
	body, err := jsonrpc.Encode(msg) // the request's body was read once, here
	if err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: %v", err)
	}
	in := r.Clone(r.Context())
	in.Body, in.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	var failed error
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.RawQuery = ""
			pr.Out.Header.Del("Accept-Encoding") // the answer is streamed back as it is
			pr.Out.Header.Set(forwardedHeader, "1")
		},
		Transport:     t.forward,
		FlushInterval: -1, // an event stream goes out as it comes
		ModifyResponse: func(resp *http.Response) error {
			// Only what describes the body: the holder's own headers
			// (its request id, say) are not this replica's answer.
			for k := range resp.Header {
				if k != "Content-Type" && k != "Cache-Control" {
					delete(resp.Header, k)
				}
			}
			t.core.Metrics().BridgeRound(metrics.BridgeForwarded)
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) { failed = err },
		ErrorLog:     zap.NewStdLog(t.log),
	}
	proxy.ServeHTTP(w, in)
	if failed != nil {
		t.log.Warn("could not forward a bridged retry to the replica holding its call", zap.String("replica", home), zap.Error(failed))
		return jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "mcpgw: the call waits on the replica at %s, which could not be reached; retry later", home)
	}
	return nil
}
