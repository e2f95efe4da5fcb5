package core

import (
	"bytes"
	"net/http"
	"strings"

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

const forwardedHeader = "Mcp-Gateway-Forwarded"

// hopHeaders are not passed on (RFC 9110 §7.6.1, and what net/http sets).
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true,
	"Upgrade": true, "Host": true, "Content-Length": true,
	"Accept-Encoding": true, // the answer is streamed back as it is, uncompressed
}

// forwardClient talks to the other replicas directly: never through an
// HTTP proxy from the environment, which would see the client's credentials.
func forwardClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return &http.Client{Transport: t}
}

// forwardRetry passes a retry to the replica at home and streams its answer
// back; an error (nothing written yet) when it cannot.
func (c *Core) forwardRetry(w http.ResponseWriter, r *http.Request, home string, msg *jsonrpc.Message) *jsonrpc.Error {
	if r.Header.Get(forwardedHeader) != "" {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid requestState: its call waits on the replica at %s, and this request was already forwarded once", home)
	}
	body, err := jsonrpc.Encode(msg)
	if err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: %v", err)
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, strings.TrimSuffix(home, "/")+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: forwarding to %s: %v", home, err)
	}
	for k, vs := range r.Header {
		if !hopHeaders[http.CanonicalHeaderKey(k)] {
			req.Header[k] = vs
		}
	}
	req.Header.Set(forwardedHeader, "1")
	resp, err := c.forward.Do(req)
	if err != nil {
		c.log.Warn("could not forward a bridged retry to the replica holding its call", zap.String("replica", home), zap.Error(err))
		return jsonrpc.Errorf(mcp.CodeUpstreamUnavailable, "mcpgw: the call waits on the replica at %s, which could not be reached; retry later", home)
	}
	defer resp.Body.Close()
	c.bridge.m.BridgeRound(metrics.BridgeForwarded)
	for _, k := range []string{"Content-Type", "Cache-Control"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 4096)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			if flusher != nil {
				flusher.Flush() // an event stream goes out as it comes
			}
		}
		if rerr != nil { // io.EOF included: the answer is complete
			return nil
		}
	}
}
