package edge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestSaneRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"abc-123":                          true,
		"0af7651916cd43dd8448eb211c80319c": true,
		"req_1.2:3/4+5=6@x":                true,
		strings.Repeat("a", 128):           true,
		"":                                 false,
		strings.Repeat("a", 129):           false,
		"has space":                        false,
		"line\nbreak":                      false,
		"quote\"":                          false,
		"tab\t":                            false,
		"ünicode":                          false,
		"semi;colon":                       false,
	} {
		if got := saneRequestID(id); got != want {
			t.Errorf("saneRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}

var generatedID = regexp.MustCompile(`^[A-Z2-7]{26}$`) // crypto/rand.Text

// The middleware keeps a sane id, replaces anything else, echoes it, and
// gives the handler (and work detached from the request) a logger with it.
func TestRequestIDMiddleware(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	g := NewChecks("127.0.0.1:8080", "", nil)
	var seen string
	h := RequestIDs(log)(g.Middleware(log)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = RequestID(r.Context())
		Logger(r.Context(), log).Info("in handler")
		detached := WithRequestLog(context.Background(), r.Context())
		Logger(detached, log).Info("detached")
	})))

	for _, tc := range []struct {
		name, in string
		keep     bool
	}{
		{"sane", "client-id-42", true},
		{"missing", "", false},
		{"insane", "evil\" injected=1", false},
		{"too long", strings.Repeat("x", 200), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.TakeAll()
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
			if tc.in != "" {
				req.Header.Set(HeaderRequestID, tc.in)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			got := w.Header().Get(HeaderRequestID)
			if tc.keep && got != tc.in {
				t.Errorf("echoed %q, want the client's %q", got, tc.in)
			}
			if !tc.keep && !generatedID.MatchString(got) {
				t.Errorf("echoed %q, want a generated id", got)
			}
			if seen != got {
				t.Errorf("handler saw id %q, response says %q", seen, got)
			}
			entries := logs.AllUntimed()
			if len(entries) != 2 {
				t.Fatalf("%d log lines, want 2", len(entries))
			}
			for _, e := range entries {
				if id := e.ContextMap()["request_id"]; id != got {
					t.Errorf("log line %q has request_id %v, want %q", e.Message, id, got)
				}
			}
		})
	}

	// Two requests without ids get different ones.
	a, b := httptest.NewRecorder(), httptest.NewRecorder()
	h.ServeHTTP(a, httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil))
	h.ServeHTTP(b, httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil))
	if a.Header().Get(HeaderRequestID) == b.Header().Get(HeaderRequestID) {
		t.Error("two requests got the same generated id")
	}
}

// A request refused at the edge is logged with its id, and the refusal
// carries the id back.
func TestRequestIDOnRefusal(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	g := NewChecks("127.0.0.1:8080", "", nil)
	h := RequestIDs(log)(g.Middleware(log)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the refused request reached the handler")
	})))
	for _, mod := range []func(*http.Request){
		func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") },
		func(r *http.Request) { r.Host = "evil.example" },
	} {
		logs.TakeAll()
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
		req.Header.Set(HeaderRequestID, "refused-1")
		mod(req)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusForbidden || w.Header().Get(HeaderRequestID) != "refused-1" {
			t.Errorf("status %d, id %q; want 403 with the id", w.Code, w.Header().Get(HeaderRequestID))
		}
		entries := logs.FilterField(zap.String("request_id", "refused-1")).All()
		if len(entries) != 1 || !strings.HasPrefix(entries[0].Message, "refused request") {
			t.Errorf("refusal log lines with the id: %+v", logs.AllUntimed())
		}
	}
	if Logger(context.Background(), log) != log {
		t.Error("outside a request, logger should be the router's")
	}
}
