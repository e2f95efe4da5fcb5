package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

// WriteJSON writes what Encode writes, small or large, edits applied; a
// large answer says its length up front.
func TestWriteJSON(t *testing.T) {
	big := json.RawMessage(`{"t":"` + strings.Repeat("b", 100<<10) + `"}`)
	for _, tc := range []struct {
		name   string
		status int
		msg    *jsonrpc.Message
		length bool // Content-Length set by WriteJSON
	}{
		{"small", http.StatusOK, jsonrpc.NewResult(jsonrpc.IntID(1), json.RawMessage(`{"a":1}`)), false},
		{"error status", http.StatusBadRequest, jsonrpc.NewError(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "no")), false},
		{"large", http.StatusOK, jsonrpc.NewResult(jsonrpc.IntID(2), big), true},
		{"large with an edit", http.StatusOK, &jsonrpc.Message{JSONRPC: "2.0", ID: jsonrpc.IntID(3), Result: big,
			ResultEdits: []jsonrpc.Edit{{Start: len(big) - 1, End: len(big) - 1, With: []byte(`,"resultType":"complete"`)}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := jsonrpc.Encode(tc.msg)
			rec := httptest.NewRecorder()
			WriteJSON(rec, tc.status, tc.msg)
			if rec.Code != tc.status || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("status %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			if rec.Body.String() != string(want) {
				t.Errorf("body %.80q… (%d bytes), want %.80q… (%d bytes)", rec.Body.String(), rec.Body.Len(), want, len(want))
			}
			if cl := rec.Header().Get("Content-Length"); tc.length && cl != strconv.Itoa(len(want)) {
				t.Errorf("Content-Length %q, want %d", cl, len(want))
			}
		})
	}
}

func TestAccepts(t *testing.T) {
	for _, tt := range []struct {
		accept, mediaType string
		want              bool
	}{
		{"application/json, text/event-stream", "text/event-stream", true},
		{"application/json, text/event-stream", "application/json", true},
		{"text/event-stream;q=0.9 ,application/json;q=1", "application/json", true},
		{"Text/Event-Stream", "text/event-stream", true},
		{"*/*", "application/json", true},
		{"application/json", "text/event-stream", false},
		{"application/jsonx, text/plain", "application/json", false},
		{"", "application/json", false},
		{",,;", "application/json", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Accept", tt.accept)
		if got := Accepts(r, tt.mediaType); got != tt.want {
			t.Errorf("Accepts(%q, %q) = %v, want %v", tt.accept, tt.mediaType, got, tt.want)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Accept", "application/json, text/event-stream")
	if n := testing.AllocsPerRun(100, func() { Accepts(r, "text/event-stream") }); n != 0 {
		t.Errorf("Accepts allocates %v times per request, want 0", n)
	}
}
