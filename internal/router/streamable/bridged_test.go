package streamable

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// Before streamDelay a stateless call's events wait, so that an error can
// still go out as plain JSON with its own status; they are bounded: past
// maxEarly the stream starts at once. After the delay the first event
// starts it; with nothing to stream the answer stays JSON.
func TestStatelessStreamEarlyBound(t *testing.T) {
	ev := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":%d}}`, i))
	}

	rec := httptest.NewRecorder()
	st := &statelessStream{w: rec, streaming: true}
	for i := range maxEarly {
		st.Emit(ev(i))
	}
	if st.sw != nil || len(st.early) != maxEarly || rec.Body.Len() != 0 {
		t.Fatalf("%d early events: stream started %v, kept %d, written %d bytes; want all kept, nothing written", maxEarly, st.sw != nil, len(st.early), rec.Body.Len())
	}
	st.Emit(ev(maxEarly))
	if st.sw == nil || st.early != nil {
		t.Fatalf("one more: stream started %v, kept %d; want the stream started and nothing kept", st.sw != nil, len(st.early))
	}
	if got := strings.Count(rec.Body.String(), "notifications/progress"); got != maxEarly+1 {
		t.Errorf("%d events on the stream, want %d, in order", got, maxEarly+1)
	}

	// A client that accepts no event stream: nothing is kept at all.
	st = &statelessStream{w: httptest.NewRecorder(), streaming: false}
	for i := range 3 * maxEarly {
		st.Emit(ev(i))
	}
	if len(st.early) != 0 || st.sw != nil {
		t.Errorf("a JSON-only client: kept %d, stream %v", len(st.early), st.sw != nil)
	}

	// The delay passed with nothing to stream: no stream; the first event starts it.
	rec = httptest.NewRecorder()
	st = &statelessStream{w: rec, streaming: true}
	st.HoldPassed()
	if st.sw != nil || rec.Body.Len() != 0 {
		t.Fatal("the delay alone started a stream")
	}
	st.Emit(ev(1))
	if st.sw == nil || !strings.Contains(rec.Body.String(), "notifications/progress") {
		t.Errorf("an event after the delay: stream %v, body %q", st.sw != nil, rec.Body.String())
	}
}
