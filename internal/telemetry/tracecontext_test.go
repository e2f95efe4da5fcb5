package telemetry

import (
	"net/http"
	"regexp"
	"testing"
)

// The W3C form, as a regexp: the oracle the hand-written check must agree with.
var traceparentForm = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

const goodTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceFromHeaders(t *testing.T) {
	for _, tc := range []struct {
		name, parent string
		valid        bool
	}{
		{"valid", goodTraceparent, true},
		{"none", "", false},
		{"upper-case hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", false},
		{"one short", goodTraceparent[:54], false},
		{"one long", goodTraceparent + "0", false},
		{"dash moved", "000-bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"not hex", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
		{"trailing newline", goodTraceparent[:54] + "\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Traceparent": {tc.parent}, "Tracestate": {"k=v"}, "Baggage": {"b=1"}}
			got := TraceFromHeaders(h)
			if tc.valid {
				if got != (Trace{Parent: tc.parent, State: "k=v", Baggage: "b=1"}) {
					t.Errorf("got %+v, want the three headers", got)
				}
			} else if got != (Trace{}) {
				t.Errorf("got %+v for an invalid traceparent, want none (its companions dropped with it)", got)
			}
		})
	}
}

func FuzzValidTraceparent(f *testing.F) {
	f.Add(goodTraceparent)
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0-")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validTraceparent(s), traceparentForm.MatchString(s); got != want {
			t.Errorf("validTraceparent(%q) = %v, the W3C form says %v", s, got, want)
		}
	})
}
