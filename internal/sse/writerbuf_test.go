package sse

import (
	"bytes"
	"net/http"
	"testing"
)

// discardWriter is a ResponseWriter that keeps nothing, so that only the
// Writer's own allocations are counted.
type discardWriter struct {
	h    http.Header
	sent int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { d.sent += len(p); return len(p), nil }

// A session's POST stream is a new Writer per call that sends a priming
// event and then the call's small answer: one buffer for both, not one
// per field each event outgrows (issue 28: five allocations of every
// streamed call before).
func TestWriterOneBufferPerSmallStream(t *testing.T) {
	d := &discardWriter{h: http.Header{}}
	w := NewWriterHeld(d)
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"echo:hi"}]}}`)
	stream := func() {
		w.buf = nil // as a new stream's Writer has
		_ = w.WriteLast(Event{ID: "0123456789abcdef-1-0", Data: []byte{}, Retry: 3000})
		_ = w.WriteLast(Event{ID: "0123456789abcdef-1-1", Name: "message", Data: answer})
	}
	stream()
	want := "id: 0123456789abcdef-1-0\nretry: 3000\ndata: \n\nid: 0123456789abcdef-1-1\nevent: message\ndata: " + string(answer) + "\n\n"
	if d.sent != len(want) {
		t.Fatalf("sent %d bytes, want %d", d.sent, len(want))
	}
	if n := testing.AllocsPerRun(100, stream); n > 1 {
		t.Errorf("a priming event and a small answer cost %v allocations, want 1", n)
	}
	// Multi-line data still comes out whole past the first buffer.
	var rec bytes.Buffer
	w2 := NewWriterHeld(&bufWriter{discardWriter: discardWriter{h: http.Header{}}, b: &rec})
	long := bytes.Repeat([]byte("line\n"), 200)
	if err := w2.WriteLast(Event{ID: "1", Data: long}); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.String(), "id: 1\ndata: "+string(bytes.ReplaceAll(long, []byte("\n"), []byte("\ndata: ")))+"\n\n"; got != want {
		t.Errorf("multi-line event: got %d bytes %.60q..., want %d bytes", len(got), got, len(want))
	}
}

// bufWriter is a discardWriter that keeps what is written in b.
type bufWriter struct {
	discardWriter
	b *bytes.Buffer
}

func (w *bufWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

// A stream's Writer is one allocation: its ResponseController is kept by
// value (issue 28).
func TestNewWriterHeldAllocs(t *testing.T) {
	d := &discardWriter{h: http.Header{}}
	if n := testing.AllocsPerRun(100, func() { _ = NewWriterHeld(d) }); n > 1 {
		t.Errorf("NewWriterHeld costs %v allocations, want 1", n)
	}
}
