package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unsafe"

	"github.com/mcpgw/mcpgw/internal/testwait"
)

const bigLimit = 1 << 20

// readers wraps a stream in ways that move the bufio boundaries around, so a
// CRLF or a field may arrive split over several reads.
var readers = map[string]func(io.Reader) io.Reader{
	"whole":   func(r io.Reader) io.Reader { return r },
	"onebyte": iotest.OneByteReader,
	"half":    iotest.HalfReader,
	"dataerr": iotest.DataErrReader,
}

func readAll(t *testing.T, r *Reader) ([]Event, error) {
	t.Helper()
	var evs []Event
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("Next keeps returning events")
		}
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func sameEvents(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Name != b[i].Name || a[i].Retry != b[i].Retry || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func ev(data string) Event { return Event{Data: []byte(data)} }

func TestReader(t *testing.T) {
	long := strings.Repeat("x", 100*1024) // over the 32 KiB buffer
	tests := []struct {
		name  string
		in    string
		limit int // bigLimit when 0
		want  []Event
		err   error  // after the events; io.EOF when nil
		last  string // LastEventID at the end
	}{
		{name: "one event", in: "data: hello\n\n", want: []Event{ev("hello")}},
		{name: "two events", in: "data: a\n\ndata: b\n\n", want: []Event{ev("a"), ev("b")}},
		{name: "multi-line data", in: "data: line1\ndata: line2\ndata:\ndata: line4\n\n", want: []Event{ev("line1\nline2\n\nline4")}},
		{name: "CRLF", in: "event: e\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n",
			want: []Event{{Name: "e", Data: []byte("a\nb")}, ev("c")}},
		{name: "lone CR", in: "data: a\rdata: b\r\rdata: c\r\r", want: []Event{ev("a\nb"), ev("c")}},
		{name: "mixed line endings", in: "data: a\r\ndata: b\rdata: c\n\r\ndata: d\n\r", want: []Event{ev("a\nb\nc"), ev("d")}},
		{name: "CR inside a line ends it", in: "data: a\rdata: injected\n\n", want: []Event{ev("a\ninjected")}},
		{name: "comments", in: ": keep-alive\n\n:\n: x\ndata: a\n: mid\ndata: b\n\n", want: []Event{ev("a\nb")}},
		{name: "all fields", in: "id: 42\nevent: message\nretry: 1500\ndata: {}\n\n",
			want: []Event{{ID: "42", Name: "message", Retry: 1500, Data: []byte("{}")}}, last: "42"},
		{name: "no space after colon", in: "data:x\nevent:y\nid:z\n\n", want: []Event{{ID: "z", Name: "y", Data: []byte("x")}}, last: "z"},
		{name: "only one space is removed", in: "data:  x \n\n", want: []Event{ev(" x ")}},
		{name: "colons in the value", in: "data: a:b: c\n\n", want: []Event{ev("a:b: c")}},
		{name: "field without colon", in: "data\n\n", want: []Event{ev("")}},
		{name: "unknown fields ignored", in: "foo: bar\nDATA: no\ndata: a\n\n", want: []Event{ev("a")}},
		{name: "empty events skipped", in: "\n\n\nevent: e\n\nretry: 0\n\ndata: a\n\n", want: []Event{ev("a")}},
		{name: "final event without blank line", in: "data: a\ndata: b", want: []Event{ev("a\nb")}},
		{name: "final event ending in a newline", in: "event: e\ndata: a\n", want: []Event{{Name: "e", Data: []byte("a")}}},
		{name: "final event ending in a comment", in: "id: 9\ndata: a\n: bye", want: []Event{{ID: "9", Data: []byte("a")}}, last: "9"},
		{name: "final event ending in CR", in: "data: a\r", want: []Event{ev("a")}},
		{name: "priming event", in: "id: p1\ndata:\n\ndata: x\n\n", want: []Event{{ID: "p1"}, ev("x")}, last: "p1"},
		{name: "priming event with only an id", in: "id: p1\n\ndata: x\n\n", want: []Event{ev("x")}, last: "p1"},
		{name: "id alone at the end", in: "id: p1\n\n", last: "p1"},
		{name: "unfinished id is not taken", in: "id: p1\n\nid: p2\n", last: "p1"},
		{name: "id persists", in: "id: 1\ndata: a\n\ndata: b\n\n", want: []Event{{ID: "1", Data: []byte("a")}, ev("b")}, last: "1"},
		{name: "empty id resets", in: "id: 1\ndata: a\n\nid\ndata: b\n\n", want: []Event{{ID: "1", Data: []byte("a")}, ev("b")}, last: ""},
		{name: "id with NUL ignored", in: "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", want: []Event{{ID: "1", Data: []byte("a")}, ev("b")}, last: "1"},
		{name: "retry only", in: "retry: 3000\n\n", want: []Event{{Retry: 3000}}},
		{name: "bad retry ignored", in: "retry: x\n\nretry: -1\n\nretry: +5\n\nretry: 1.5\n\nretry:\n\nretry: 99999999999999999999\n\n"},
		{name: "BOM", in: "\xEF\xBB\xBFdata: a\n\n", want: []Event{ev("a")}},
		{name: "only the first BOM", in: "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", want: []Event{ev("b")}},
		{name: "BOM later is data", in: "data: a\n\n\xEF\xBB\xBFdata: b\n\n", want: []Event{ev("a")}},
		{name: "UTF-8 and NUL in data", in: "data: é\x00ü\n\n", want: []Event{ev("é\x00ü")}},
		{name: "empty stream", in: ""},
		{name: "only comments", in: ": a\n: b"},
		{name: "long line under the limit", in: "data: " + long + "\n\n", want: []Event{ev(long)}},
		{name: "long line at the end", in: "data: " + long, want: []Event{ev(long)}},
		{name: "long lines", in: "data: " + long + "\ndata: " + long + "\r\n\r\n", want: []Event{ev(long + "\n" + long)}},
		{name: "long comment", in: ":" + long + "\ndata: a\n\n", want: []Event{ev("a")}},

		{name: "exactly the limit", in: "data: xxxx\n\n", limit: 12, want: []Event{ev("xxxx")}},
		{name: "one over the limit", in: "data: xxxx\n\n", limit: 11, err: ErrEventTooLarge},
		{name: "too large after a good event", in: "data: a\n\ndata: 0123456789abcdef\n\n", limit: 16, want: []Event{ev("a")}, err: ErrEventTooLarge},
		{name: "too large over several lines", in: strings.Repeat("data: abc\n", 10) + "\n", limit: 64, err: ErrEventTooLarge},
		{name: "comments count", in: ": " + strings.Repeat("c", 50) + "\ndata: a\n\n", limit: 32, err: ErrEventTooLarge},
		{name: "empty events do not add up", in: strings.Repeat(": ping\n\n", 100) + "data: a\n\n", limit: 10, want: []Event{ev("a")}},
		{name: "long line over the limit", in: "data: " + long + "\n\n", limit: 64 * 1024, err: ErrEventTooLarge},
		{name: "long unterminated line over the limit", in: "data: " + long, limit: 64 * 1024, err: ErrEventTooLarge},
	}
	for _, tt := range tests {
		for rname, wrap := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				limit := tt.limit
				if limit == 0 {
					limit = bigLimit
				}
				r := NewReader(wrap(strings.NewReader(tt.in)), limit)
				got, err := readAll(t, r)
				wantErr := tt.err
				if wantErr == nil {
					wantErr = io.EOF
				}
				if !errors.Is(err, wantErr) {
					t.Errorf("error = %v, want %v", err, wantErr)
				}
				if !sameEvents(got, tt.want) {
					t.Errorf("events = %s\nwant %s", fmtEvents(got), fmtEvents(tt.want))
				}
				if wantErr == io.EOF && r.LastEventID() != tt.last {
					t.Errorf("LastEventID = %q, want %q", r.LastEventID(), tt.last)
				}
				for _, e := range got {
					if len(e.Data) > limit {
						t.Errorf("event of %d bytes over the limit %d", len(e.Data), limit)
					}
				}
			})
		}
	}
}

func fmtEvents(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		d := string(e.Data)
		if len(d) > 40 {
			d = fmt.Sprintf("%s...(%d bytes)", d[:40], len(d))
		}
		fmt.Fprintf(&b, "{ID:%q Name:%q Retry:%d Data:%q} ", e.ID, e.Name, e.Retry, d)
	}
	return "[" + b.String() + "]"
}

func TestReaderLastEventIDAfterEachEvent(t *testing.T) {
	r := NewReader(strings.NewReader("id: 1\ndata: a\n\ndata: b\n\nid: 3\n\nid: 4\ndata: d\n\n"), bigLimit)
	for _, want := range []string{"1", "1", "4"} {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if got := r.LastEventID(); got != want {
			t.Errorf("LastEventID = %q, want %q", got, want)
		}
	}
}

var errBoom = errors.New("boom")

func TestReaderReadError(t *testing.T) {
	r := NewReader(io.MultiReader(strings.NewReader("id: 1\ndata: a\n\nid: 2\ndata: b\n"), iotest.ErrReader(errBoom)), bigLimit)
	e, err := r.Next()
	if err != nil || string(e.Data) != "a" {
		t.Fatalf("first event = %+v, %v", e, err)
	}
	// An event cut short by a read error is dropped, and its id not taken.
	if _, err := r.Next(); !errors.Is(err, errBoom) {
		t.Fatalf("error = %v, want %v", err, errBoom)
	}
	if r.LastEventID() != "1" {
		t.Errorf("LastEventID = %q, want 1", r.LastEventID())
	}
}

// An event must be returned as soon as its blank line arrives, even when the
// line ends in a CR whose possible LF has not arrived yet.
func TestReaderDoesNotWaitAfterBlankLine(t *testing.T) {
	for _, first := range []string{"data: a\n\n", "data: a\r\n\r\n", "data: a\r\r", "data: a\n\r"} {
		pr, pw := io.Pipe()
		r := NewReader(pr, bigLimit)
		done := make(chan Event, 1)
		go func() {
			e, _ := r.Next()
			done <- e
		}()
		if _, err := pw.Write([]byte(first)); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-done:
			if string(e.Data) != "a" {
				t.Errorf("%q: event %q", first, e.Data)
			}
		case <-time.After(testwait.Long): // a bound on the event, far above its time
			t.Fatalf("%q: Next blocked after a complete event", first)
		}
		// A following LF is the end of the CR line, not a blank line.
		go func() { _, _ = pw.Write([]byte("\ndata: b\n\n")); pw.Close() }()
		e, err := r.Next()
		if err != nil || string(e.Data) != "b" {
			t.Errorf("%q: second event %q, %v", first, e.Data, err)
		}
	}
}

func TestWriterHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	NewWriter(rec)
	if rec.Code != http.StatusOK {
		t.Errorf("status = %d", rec.Code)
	}
	for k, want := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache, no-transform",
		"X-Accel-Buffering": "no",
	} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if !rec.Flushed {
		t.Error("headers not flushed")
	}
}

func TestWriterFormat(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if err := w.Write(Event{ID: "7", Name: "message", Retry: 500, Data: []byte("a\nb")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("keep-alive"); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Event{}); err != nil {
		t.Fatal(err)
	}
	want := "id: 7\nevent: message\nretry: 500\ndata: a\ndata: b\n\n: keep-alive\n\ndata: \n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body = %q\nwant   %q", got, want)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	big := strings.Repeat("0123456789", 10*1024)
	events := []Event{
		ev("hello"),
		{ID: "1", Name: "message", Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{"a":"<b>"}}`)},
		ev("a\nb\n\nc"),
		ev(""),
		ev("\n"),
		ev("\n\nx\n\n"),
		ev(" leading and trailing space "),
		{ID: " spaced id ", Name: " n:a:m:e ", Data: []byte("x")},
		{Retry: 2500, Data: []byte("r")},
		{Retry: 2500},
		{ID: "only-id"},
		ev(": not a comment"),
		ev("data: not a field\nid: nor this"),
		{ID: "é", Name: "ü", Data: []byte("ß\x00\xff")},
		ev(big),
		ev(big + "\n" + big),
	}
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	for i, e := range events {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := w.Comment(fmt.Sprintf("ping %d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for rname, wrap := range readers {
		t.Run(rname, func(t *testing.T) {
			r := NewReader(wrap(bytes.NewReader(rec.Body.Bytes())), bigLimit)
			got, err := readAll(t, r)
			if err != io.EOF {
				t.Fatalf("error = %v", err)
			}
			if !sameEvents(got, events) {
				t.Errorf("read back %s\nwant %s", fmtEvents(got), fmtEvents(events))
			}
			if r.LastEventID() != "é" {
				t.Errorf("LastEventID = %q", r.LastEventID())
			}
		})
	}
}

// Data line breaks of any kind come back as LF.
func TestWriterNormalizesLineBreaks(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if err := w.Write(ev("a\r\nb\rc\n\rd\r")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rec.Body.String(), "\r") {
		t.Errorf("CR written: %q", rec.Body.String())
	}
	got, err := readAll(t, NewReader(rec.Body, bigLimit))
	if err != io.EOF || !sameEvents(got, []Event{ev("a\nb\nc\n\nd\n")}) {
		t.Errorf("read back %s, %v", fmtEvents(got), err)
	}
}

// An id, name or comment must not be able to start fields of its own.
func TestWriterRejectsInjection(t *testing.T) {
	for _, e := range []Event{
		{ID: "1\ndata: injected", Data: []byte("x")},
		{ID: "1\rdata: injected", Data: []byte("x")},
		{ID: "1\x00", Data: []byte("x")},
		{Name: "message\n\ndata: injected", Data: []byte("x")},
		{Name: "a\rb", Data: []byte("x")},
	} {
		rec := httptest.NewRecorder()
		w := NewWriter(rec)
		if err := w.Write(e); err == nil {
			t.Errorf("Write(%q, %q) succeeded", e.ID, e.Name)
		}
		if rec.Body.Len() != 0 {
			t.Errorf("Write(%q, %q) wrote %q", e.ID, e.Name, rec.Body.String())
		}
	}

	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if err := w.Comment("a\ndata: injected\r\rid: 666\n\nb"); err != nil {
		t.Fatal(err)
	}
	r := NewReader(rec.Body, bigLimit)
	got, err := readAll(t, r)
	if err != io.EOF || len(got) != 0 || r.LastEventID() != "" {
		t.Errorf("comment produced events %s, id %q, %v (body %q)", fmtEvents(got), r.LastEventID(), err, rec.Body.String())
	}
}

type failingWriter struct{ h http.Header }

func (f *failingWriter) Header() http.Header         { return f.h }
func (f *failingWriter) WriteHeader(int)             {}
func (f *failingWriter) Write(b []byte) (int, error) { return 0, errBoom }

func TestWriterWriteError(t *testing.T) {
	w := NewWriter(&failingWriter{h: http.Header{}}) // no Flusher: must not panic
	if err := w.Write(ev("x")); !errors.Is(err, errBoom) {
		t.Errorf("Write error = %v", err)
	}
	if err := w.Comment("x"); !errors.Is(err, errBoom) {
		t.Errorf("Comment error = %v", err)
	}
}

// flushCounter is a ResponseWriter that counts flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

// What each way of writing a stream flushes: every write syscall saved is
// one less per call on the answer path.
func TestWriterFlushes(t *testing.T) {
	ev := Event{ID: "1", Name: "message", Data: []byte(`{"a":1}`)}
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
		want  int
	}{
		{"NewWriter flushes the headers", func(w http.ResponseWriter) { NewWriter(w) }, 1},
		{"NewWriterHeld holds them", func(w http.ResponseWriter) { NewWriterHeld(w) }, 0},
		{"held headers go with the first event", func(w http.ResponseWriter) { _ = NewWriterHeld(w).Write(ev) }, 1},
		{"WriteLast does not flush", func(w http.ResponseWriter) {
			sw := NewWriterHeld(w)
			_ = sw.Write(ev)
			_ = sw.WriteLast(ev)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			tc.write(fc)
			if fc.flushes != tc.want {
				t.Fatalf("%d flushes, want %d", fc.flushes, tc.want)
			}
			if got := fc.Header().Get("Content-Type"); got != "text/event-stream" {
				t.Fatalf("Content-Type %q", got)
			}
		})
	}
	// WriteLast's event is written all the same.
	rec := httptest.NewRecorder()
	if err := NewWriterHeld(rec).WriteLast(ev); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), "id: 1\nevent: message\ndata: {\"a\":1}\n\n"; got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
}

// BenchmarkReaderBigEvent reads one 1 MiB event, as an upstream's 1 MiB
// tool result arrives: the line is gathered across buffer refills, in
// chunks of the reader's own or of a pool shared by the readers.
func BenchmarkReaderBigEvent(b *testing.B) {
	in := []byte("id: 1\nevent: message\ndata: {\"x\":\"" + strings.Repeat("x", 1<<20) + "\"}\n\n")
	var shared Chunks
	for _, c := range []struct {
		name   string
		chunks *Chunks
	}{{"own-chunks", nil}, {"shared-chunks", &shared}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				ev, err := NewReaderChunks(bytes.NewReader(in), 4<<20, c.chunks).Next()
				if err != nil || len(ev.Data) != 1<<20+8 {
					b.Fatal(len(ev.Data), err)
				}
			}
		})
	}
}

// A line longer than the reader's buffer is allocated once, at its size,
// however it arrives; its pieces go back to the pool.
func TestReaderLongLineExactSize(t *testing.T) {
	data := `{"x":"` + strings.Repeat("x", 300<<10) + `"}`
	in := "data: " + data + "\r\ndata: short\n\ndata: " + data + "\n\n"
	var pool Chunks
	for rname, wrap := range readers {
		t.Run(rname, func(t *testing.T) {
			r := NewReaderChunks(wrap(strings.NewReader(in)), 1<<20, &pool)
			first, err := r.Next()
			if err != nil || string(first.Data) != data+"\nshort" {
				t.Fatalf("first event: %d bytes, %v", len(first.Data), err)
			}
			second, err := r.Next()
			if err != nil || string(second.Data) != data {
				t.Fatalf("second event: %d bytes, %v", len(second.Data), err)
			}
			if cap(second.Data) != len(second.Data) {
				t.Errorf("the event's data has capacity %d for %d bytes", cap(second.Data), len(second.Data))
			}
			if len(r.long) != 0 {
				t.Errorf("%d chunks kept after the line", len(r.long))
			}
		})
	}
	// Without a pool: the chunks and the line, about twice the line, not
	// the four times of a buffer grown by doubling.
	one := "data: " + data + "\n\n"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ev, err := NewReader(strings.NewReader(one), 1<<20).Next()
	runtime.ReadMemStats(&after)
	if err != nil || len(ev.Data) != len(data) {
		t.Fatal(len(ev.Data), err)
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(2*len(one)+3*chunkSize); got > limit {
		t.Errorf("reading a %d-byte line allocated %d bytes, want at most %d", len(one), got, limit)
	}
}

// WritePieces writes what Write writes for the pieces joined, wherever the
// data is cut, a CRLF cut in two included.
func TestWritePiecesIsWrite(t *testing.T) {
	long := strings.Repeat("z", 3000)
	for _, data := range []string{
		"", "a", "a\r\nb", "a\rb\nc\r\n", "\r\n\r\n", "x\r", long, long + "\r\n" + long + "\n", "a\n" + long + "\rb",
	} {
		whole := httptest.NewRecorder()
		if err := NewWriter(whole).Write(Event{ID: "1", Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
		for _, cuts := range [][]int{{0}, {len(data)}, {len(data) / 2}, {1, len(data) - 1}, {0, 0, len(data) / 3, len(data) / 3}} {
			var pieces [][]byte
			prev := 0
			for _, c := range cuts {
				c = max(prev, min(c, len(data)))
				pieces = append(pieces, []byte(data[prev:c]))
				prev = c
			}
			pieces = append(pieces, []byte(data[prev:]))
			rec := httptest.NewRecorder()
			if err := NewWriter(rec).WritePieces(Event{ID: "1"}, pieces); err != nil {
				t.Fatal(err)
			}
			if rec.Body.String() != whole.Body.String() {
				t.Errorf("data %.20q cut at %v: %.60q, want %.60q", data, cuts, rec.Body.String(), whole.Body.String())
			}
		}
	}
}

// pointerWriter remembers the buffers it is handed.
type pointerWriter struct {
	httptest.ResponseRecorder
	got []*byte
}

func (p *pointerWriter) Write(b []byte) (int, error) {
	p.got = append(p.got, unsafe.SliceData(b))
	return len(b), nil
}

// A long data line goes to the response from its own memory: the event
// costs no copy of it, and a small buffer for its framing.
func TestWriterHandsLongLinesOn(t *testing.T) {
	data := []byte(`{"jsonrpc":"2.0","id":1,"result":{"t":"` + strings.Repeat("y", 1<<20) + `"}}`)
	pw := &pointerWriter{ResponseRecorder: *httptest.NewRecorder()}
	w := NewWriter(pw)
	if err := w.WriteLastPieces(Event{ID: "1", Name: "message"}, [][]byte{data[:10], data[10:]}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pw.got, &data[10]) {
		t.Error("the long piece was copied")
	}
	pw.got = pw.got[:0]
	if n := testing.AllocsPerRun(10, func() { _ = w.WriteLast(Event{ID: "1", Name: "message", Data: data}) }); n > 1 {
		t.Errorf("a 1 MiB event costs %v allocations, want at most 1", n)
	}
}

// countingReader counts the reads made of it.
type countingReader struct {
	io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.Reader.Read(p)
}

// The rest of a long line is read straight into its chunks, in reads as
// large as a chunk, not through the 4 KiB read-ahead; what follows the
// line in the same read is the next event's.
func TestReaderReadsLongLinesInLargeReads(t *testing.T) {
	data := strings.Repeat("q", 1<<20)
	src := &countingReader{Reader: strings.NewReader("data: " + data + "\r\n\r\ndata: next\n\n")}
	r := NewReaderChunks(src, 2<<20, &Chunks{})
	ev, err := r.Next()
	if err != nil || string(ev.Data) != data {
		t.Fatalf("first event: %d bytes, %v", len(ev.Data), err)
	}
	if want := len(data)/chunkSize + 4; src.reads > want {
		t.Errorf("%d reads for a %d-byte line, want at most %d", src.reads, len(data), want)
	}
	if ev, err := r.Next(); err != nil || string(ev.Data) != "next" {
		t.Fatalf("second event: %q, %v", ev.Data, err)
	}
}

// A released reader's buffer serves the next reader of the same Chunks;
// the events the first returned are untouched by the second's reads, and
// the released reader reads nothing more.
func TestReaderRelease(t *testing.T) {
	var c Chunks
	first := NewReaderChunks(strings.NewReader("data: one\n\ndata: two\n\n"), bigLimit, &c)
	ev, err := first.Next()
	if err != nil || string(ev.Data) != "one" {
		t.Fatalf("first event %q, %v", ev.Data, err)
	}
	buf := first.own
	first.Release()
	if _, err := first.Next(); err == nil {
		t.Error("a released reader read on")
	}
	second := NewReaderChunks(strings.NewReader("data: three-three-three\n\n"), bigLimit, &c)
	if second.own != buf {
		// sync.Pool may drop what it holds (a GC in between): rare, and
		// then there is nothing to check.
		t.Skip("the pool dropped the buffer")
	}
	if ev2, err := second.Next(); err != nil || string(ev2.Data) != "three-three-three" {
		t.Fatalf("second reader's event %q, %v", ev2.Data, err)
	}
	if string(ev.Data) != "one" {
		t.Errorf("the first reader's event became %q once its buffer was reused", ev.Data)
	}
}

// TestReaderEnded: Ended is true only once the source's end was seen and
// every event before it returned, so that a caller can finish a stream
// whose end came with its last event without a read that could wait.
func TestReaderEnded(t *testing.T) {
	const stream = "data: a\n\ndata: b\n\n"
	// DataErrReader returns io.EOF with the last bytes, as a chunked body
	// does when its end was read with them.
	rd := NewReader(iotest.DataErrReader(strings.NewReader(stream)), 1<<10)
	if rd.Ended() {
		t.Fatal("Ended before anything was read")
	}
	if ev, err := rd.Next(); err != nil || string(ev.Data) != "a" || rd.Ended() {
		t.Fatalf("first event %q %v, Ended %v (b is still buffered)", ev.Data, err, rd.Ended())
	}
	if ev, err := rd.Next(); err != nil || string(ev.Data) != "b" || !rd.Ended() {
		t.Fatalf("last event %q %v, Ended %v, want true", ev.Data, err, rd.Ended())
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("after Ended: %v, want io.EOF", err)
	}

	// A source that reports its end only on a later read: not Ended
	// after the last event (the next read could wait).
	rd = NewReader(strings.NewReader(stream), 1<<10)
	rd.Next()
	rd.Next()
	if rd.Ended() {
		t.Fatal("Ended with the source's end not yet seen")
	}
}
