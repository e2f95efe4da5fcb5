package edge

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/metrics"
)

// Slow senders. net/http bounds reading the headers (read_header_timeout)
// but, without a ReadTimeout, not the body — and a ReadTimeout would also
// cut every SSE stream and long call, since it stays armed while the
// response is written. So the body alone gets a deadline: BodyDeadline arms
// the connection's read deadline when a request with a body arrives and
// disarms it the moment the body has been read to its end, before the
// answer (a JSON response, an SSE stream) starts. A client that sends a
// body slowly is cut read_body_timeout after its headers; one that sends a
// body nobody reads (a refused or unknown request) is cut when the server
// discards the rest.

// BodyDeadline is the middleware that bounds reading a request body by
// timeout, counting a body cut short in m (read_body_timeout).
func BodyDeadline(timeout time.Duration, m *metrics.Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if timeout <= 0 || r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
				next.ServeHTTP(w, r) // not a net/http connection (tests)
				return
			}
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, m: m}
			next.ServeHTTP(w, r)
		})
	}
}

// deadlineBody disarms the read deadline once the body reached its end.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	m       *metrics.Metrics
	done    atomic.Bool
	counted atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		if !b.done.Swap(true) {
			// Read whole: what follows is the answer, which may stream for
			// as long as the call runs.
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	case IsBodyTimeout(err):
		if !b.counted.Swap(true) {
			b.m.LimitRefused("read_body_timeout")
		}
	}
	return n, err
}

// IsBodyTimeout reports whether err ended reading a request body at its
// deadline (read_body_timeout).
func IsBodyTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
