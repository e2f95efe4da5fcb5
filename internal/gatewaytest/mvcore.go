package gatewaytest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// EchoHeaders serves, on loopback until the test ends, an upstream (or
// token endpoint) that answers every request with 401 and a body repeating
// the request's headers and form: one that echoes credentials into the
// error the gateway logs, so tests can check the log redacts them.
func EchoHeaders(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "rejected: headers %v form %v", r.Header, r.PostForm)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}
