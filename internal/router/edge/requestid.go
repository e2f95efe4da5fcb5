package edge

// Request ids: every HTTP request gets one, taken from X-Request-Id when the
// client (or a proxy in front) sent a sane one, generated otherwise. It is
// echoed in the response's X-Request-Id and carried in the request's context
// as a logger with the field request_id, so every log line about the
// request says which request it was. Use Logger(ctx, fallback) on the
// request path.

import (
	"context"
	"crypto/rand"
	"net/http"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// HeaderRequestID carries the request id in both directions.
const HeaderRequestID = "X-Request-Id"

// maxRequestIDLen bounds an id taken from a client.
const maxRequestIDLen = 128

// requestLog is what the context carries about a request: its id, and
// the logger its own is derived from when something is logged (Logger).
// Not derived up front: even zap's WithLazy clones the logger, about ten
// allocations per request that logs nothing (issue 18).
type requestLog struct {
	id   string
	base *zap.Logger
}

// RequestID makes the requestLog the request's telemetry.RequestRef.
func (rl *requestLog) RequestID() string { return rl.id }

// RequestIDs is the outermost middleware: it runs before the edge checks,
// so that refusals are logged with the id too. log is the logger the
// request's own is derived from.
func RequestIDs(log *zap.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return requestIDs(log, next) }
}

func requestIDs(log *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !saneRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		rl := &requestLog{id: id, base: log}
		ctx := telemetry.WithRequestRef(r.Context(), rl)                     // the upstream side names it in its errors
		ctx = telemetry.WithTrace(ctx, telemetry.TraceFromHeaders(r.Header)) // passed on upstream
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// saneRequestID accepts 1 to 128 characters of letters, digits and
// - _ . : / + = @, so that an id from a client cannot forge log lines,
// inject headers or bloat logs.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '/', c == '+', c == '=', c == '@':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns 128 random bits in base32.
func newRequestID() string { return rand.Text() }

// RequestID returns the request id carried by ctx, or "".
func RequestID(ctx context.Context) string {
	if rl, _ := telemetry.RequestRefFrom(ctx).(*requestLog); rl != nil {
		return rl.id
	}
	return ""
}

// Logger returns the request's logger (with request_id) when ctx belongs
// to a request, else fallback. It is made on each call: for the lines a
// request logs (refusals, failures), not for every request.
func Logger(ctx context.Context, fallback *zap.Logger) *zap.Logger {
	if rl, _ := telemetry.RequestRefFrom(ctx).(*requestLog); rl != nil {
		return rl.base.With(zap.String("request_id", rl.id))
	}
	return fallback
}

// WithRequestLog carries the request id and logger of from into ctx: for
// work that outlives the HTTP request's own context (a streamed call runs
// in the session's context).
func WithRequestLog(ctx, from context.Context) context.Context {
	if rl, _ := telemetry.RequestRefFrom(from).(*requestLog); rl != nil {
		return telemetry.WithRequestRef(ctx, rl)
	}
	return ctx
}
