package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// refParse is a direct, whole-input rendering of the event-stream rules
// Reader implements: lines end in CRLF, LF or CR; a leading BOM is dropped;
// a blank line ends an event, which is returned when it has data or a retry
// and sets LastEventID either way; an event cut short by the end of the stream
// is still returned (and sets LastEventID) when it has data or a retry, and
// is dropped otherwise. It returns the events, LastEventID after each, and
// LastEventID at the end.
func refParse(in []byte) (evs []Event, ids []string, last string) {
	in = bytes.TrimPrefix(in, []byte("\xEF\xBB\xBF"))
	var lines [][]byte
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			lines = append(lines, in)
			break
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	lines = append(lines, nil) // the end of the stream ends the last event

	var cur Event
	var data []string
	hasData := false
	idBuf := ""
	for i, l := range lines {
		line := string(l)
		if line == "" {
			if i < len(lines)-1 || hasData || cur.Retry > 0 {
				last = idBuf
			}
			if hasData || cur.Retry > 0 {
				if hasData {
					cur.Data = []byte(strings.Join(data, "\n"))
				}
				evs = append(evs, cur)
				ids = append(ids, last)
			}
			cur, data, hasData = Event{}, nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data = append(data, value)
			hasData = true
		case "event":
			cur.Name = value
		case "id":
			if !strings.Contains(value, "\x00") {
				cur.ID, idBuf = value, value
			}
		case "retry":
			if n, ok := parseRetry([]byte(value)); ok {
				cur.Retry = n
			}
		}
	}
	return evs, ids, last
}

var readerSeeds = []string{
	"data: hello\n\n",
	"id: 1\r\nevent: e\r\nretry: 10\r\ndata: a\r\ndata: b\r\n\r\n",
	"data: a\rdata: b\r\r: c\rid: x\r\r",
	"\xEF\xBB\xBFdata: a\n\n",
	": comment\n\nid: p\n\ndata:\n\n",
	"data: a\n: end",
	"data: a\ndata",
	"retry: 5\n\nretry: x\n\nid: a\x00\ndata: b\n",
	"id\n\ndata:  x\r\n\r",
	"event: only\n\n\n\n",
	// Lines longer than the 32 KiB buffer are left to TestReader: inputs that
	// large make the fuzzer spend its time minimizing.
}

// FuzzReader checks that Reader never panics, never returns an event larger
// than its limit, and, when the limit is out of the way, returns exactly the
// events of refParse, however the input is split into reads.
func FuzzReader(f *testing.F) {
	for i, s := range readerSeeds {
		f.Add([]byte(s), uint16(len(s)/2+i), byte(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint16, mode byte) {
		wrap := func(r io.Reader) io.Reader {
			switch mode % 4 {
			case 1:
				return iotest.OneByteReader(r)
			case 2:
				return iotest.HalfReader(r)
			case 3:
				return iotest.DataErrReader(r)
			}
			return r
		}
		wantEvs, wantIDs, wantLast := refParse(in)

		// A limit out of the way: the events must be refParse's.
		r := NewReader(wrap(bytes.NewReader(in)), len(in)+1)
		for i := 0; ; i++ {
			ev, err := r.Next()
			if err != nil {
				if err != io.EOF {
					t.Fatalf("error %v, want io.EOF", err)
				}
				if i != len(wantEvs) {
					t.Fatalf("%d events, want %d", i, len(wantEvs))
				}
				if r.LastEventID() != wantLast {
					t.Fatalf("LastEventID at the end %q, want %q", r.LastEventID(), wantLast)
				}
				break
			}
			if i >= len(wantEvs) {
				t.Fatalf("extra event %+v", ev)
			}
			if !sameEvents([]Event{ev}, wantEvs[i:i+1]) {
				t.Fatalf("event %d = %+v, want %+v", i, ev, wantEvs[i])
			}
			if r.LastEventID() != wantIDs[i] {
				t.Fatalf("LastEventID after event %d = %q, want %q", i, r.LastEventID(), wantIDs[i])
			}
		}

		// A small limit: events stay within it, and the ones returned before
		// ErrEventTooLarge are refParse's.
		max := int(limit)%(len(in)+2) + 1
		r = NewReader(wrap(bytes.NewReader(in)), max)
		for i := 0; ; i++ {
			ev, err := r.Next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrEventTooLarge) {
					t.Fatalf("error %v", err)
				}
				break
			}
			if n := len(ev.Data) + len(ev.ID) + len(ev.Name); n > max {
				t.Fatalf("event of %d bytes over the limit %d", n, max)
			}
			if i >= len(wantEvs) || !sameEvents([]Event{ev}, wantEvs[i:i+1]) {
				t.Fatalf("event %d = %+v, not refParse's", i, ev)
			}
		}
	})
}

// FuzzWriterRoundTrip checks that whatever Writer accepts, Reader reads back
// the same, with data line breaks as LF.
func FuzzWriterRoundTrip(f *testing.F) {
	f.Add("1", "message", []byte(`{"jsonrpc":"2.0"}`), 0)
	f.Add("", "", []byte("a\r\nb\rc\n"), 100)
	f.Add(" x ", ":", []byte(""), -1)
	f.Add("a\nb", "", []byte("x"), 0)
	f.Fuzz(func(t *testing.T, id, name string, data []byte, retry int) {
		rec := httptest.NewRecorder()
		w := NewWriter(rec)
		e := Event{ID: id, Name: name, Data: data, Retry: retry}
		if err := w.Write(e); err != nil {
			if !strings.ContainsAny(id, "\r\n\x00") && !strings.ContainsAny(name, "\r\n") {
				t.Fatalf("Write refused a good event: %v", err)
			}
			if rec.Body.Len() != 0 {
				t.Fatalf("a refused event wrote %q", rec.Body.String())
			}
			return
		}
		if err := w.Comment(string(data)); err != nil {
			t.Fatal(err)
		}
		r := NewReader(rec.Body, rec.Body.Len())
		got, err := r.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		want := e
		want.Data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
		if retry < 0 {
			want.Retry = 0
		}
		if !sameEvents([]Event{got}, []Event{want}) {
			t.Fatalf("read back %+v, want %+v", got, want)
		}
		if r.LastEventID() != id {
			t.Fatalf("LastEventID = %q, want %q", r.LastEventID(), id)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("after the event: %v, want io.EOF (the comment must not be an event)", err)
		}
	})
}
