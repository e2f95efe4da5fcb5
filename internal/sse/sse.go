// Package sse reads and writes Server-Sent Events (the text/event-stream
// format of the HTML living standard), the framing both MCP HTTP transports
// use. It knows nothing of JSON-RPC.
package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Event is one dispatched event.
type Event struct {
	ID    string
	Name  string // the "event:" field; empty means "message"
	Data  []byte
	Retry int // milliseconds; 0 when not given
}

// ErrEventTooLarge is returned when an event exceeds the reader's limit.
var ErrEventTooLarge = errors.New("sse: event exceeds the size limit")

// Reader parses an event stream.
type Reader struct {
	src      io.Reader
	buf      []byte // read ahead of the parse: buf[rpos:wpos] is unread
	rpos     int
	wpos     int
	err      error // the source's error, returned once buf is drained
	maxEvent int
	lastID   string
	idBuf    string // the "last event ID buffer": the latest id field seen
	line     []byte // the current line, gathered across buffer refills
	skipLF   bool   // the previous line ended in CR: an LF next is part of it
	started  bool   // the first line (which may begin with a BOM) was read
	chunks   *Chunks
	own      *readBuf // buf's array when it came from chunks (Release gives it back)
	long     []*chunk // the rest of a line longer than line's first piece
	lastLen  int      // bytes used in the last of long
}

// NewReader returns a Reader that refuses events larger than maxEvent bytes.
func NewReader(r io.Reader, maxEvent int) *Reader { return NewReaderChunks(r, maxEvent, nil) }

// NewReaderChunks is NewReader gathering long lines in the pieces of c,
// which readers may share (nil: pieces of its own).
func NewReaderChunks(r io.Reader, maxEvent int, c *Chunks) *Reader {
	rd := &Reader{src: r, maxEvent: maxEvent, chunks: c}
	if c != nil {
		rd.own = c.getBuf()
		rd.buf = rd.own[:]
	} else {
		rd.buf = make([]byte, bufSize)
	}
	return rd
}

// Release gives the reader's read-ahead buffer back to its Chunks, for
// the next reader of the same owner: a reader is made per upstream
// response, and its 4 KiB were a fifth of the bytes a small call
// allocated. The reader must not be used after; the events it returned
// stay valid (they never share that buffer).
func (r *Reader) Release() {
	if r.own != nil {
		r.chunks.bufs.Put(r.own)
		r.own, r.buf, r.rpos, r.wpos = nil, nil, 0, 0
	}
	r.err = errReleased
}

var errReleased = errors.New("sse: the reader was released")

// bufSize is the read-ahead of a reader: 4 KiB, not more, as a reader is
// made per upstream response and most events are small. A line longer
// than that is read straight into chunks of chunkSize, in reads that large.
const (
	bufSize   = 4 << 10
	chunkSize = 32 << 10
)

type chunk [chunkSize]byte

type readBuf [bufSize]byte

// Chunks is a pool of the pieces in which Readers gather a line longer
// than their buffer, so that the line itself is allocated once, at its
// exact size, when its end is found (growing one buffer by doubling would
// allocate about four times a 1 MiB line, and copy it as often). Readers
// that share one, such as the streams of one upstream, reuse its pieces,
// and the read-ahead buffers of readers released (Reader.Release); the
// garbage collector empties it when it is not used. The zero value is
// ready.
type Chunks struct {
	pool sync.Pool // *chunk
	bufs sync.Pool // *readBuf: read-ahead buffers of released readers
}

func (c *Chunks) getBuf() *readBuf {
	if b, ok := c.bufs.Get().(*readBuf); ok {
		return b
	}
	return new(readBuf)
}

func (c *Chunks) get() *chunk {
	if c != nil {
		if k, ok := c.pool.Get().(*chunk); ok {
			return k
		}
	}
	return new(chunk)
}

func (c *Chunks) put(k *chunk) {
	if c != nil {
		c.pool.Put(k)
	}
}

// Ended reports whether the stream's source ended and everything read
// from it was returned: the next Next returns io.EOF without reading.
func (r *Reader) Ended() bool { return r.rpos == r.wpos && r.err == io.EOF && len(r.long) == 0 }

// LastEventID is the last event id the stream set (for reconnects). As in the
// HTML standard an id takes effect when its event ends with a blank line (or
// the stream ends), whether or not the event had data, so a priming event made
// of an id alone counts; an "id" field with an empty value resets it.
func (r *Reader) LastEventID() string { return r.lastID }

var bom = []byte("\xEF\xBB\xBF")

// Next returns the next event with data or a retry hint. Comments and empty
// events are skipped. It returns io.EOF at the end of the stream. Lines may end
// in LF, CRLF or a lone CR. An event whose stream ends before its blank line
// is still returned.
func (r *Reader) Next() (Event, error) {
	var ev Event
	var data []byte
	hasData := false
	size := 0
	for {
		line, n, err := r.readLine(r.maxEvent - size)
		size += n
		if err != nil && !errors.Is(err, io.EOF) {
			return Event{}, err
		}
		if size > r.maxEvent {
			return Event{}, ErrEventTooLarge
		}
		eof := err != nil
		if !r.started && (n > 0 || !eof) {
			r.started = true
			line = bytes.TrimPrefix(line, bom)
		}
		switch {
		case len(line) == 0 && eof:
			// End of stream: nothing more to add to the event.
		case len(line) == 0:
			r.lastID = r.idBuf
			if hasData || ev.Retry > 0 {
				ev.Data = data
				return ev, nil
			}
			ev, size = Event{}, 0
			continue
		case line[0] == ':':
			// comment / keep-alive
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "data":
				if hasData {
					data = append(data, '\n')
					data = append(data, value...)
				} else {
					// The event takes the line's buffer rather than a
					// copy of it (a 1 MiB result is one line); the next
					// line gets a buffer of its own.
					data, r.line = value, nil
				}
				hasData = true
			case "event":
				ev.Name = string(value)
			case "id":
				if bytes.IndexByte(value, 0) < 0 {
					ev.ID = string(value)
					r.idBuf = ev.ID
				}
			case "retry":
				if n, ok := parseRetry(value); ok {
					ev.Retry = n
				}
			}
		}
		if eof { // the stream ended without a blank line: dispatch what we have
			if hasData || ev.Retry > 0 {
				r.lastID = r.idBuf
				ev.Data = data
				return ev, nil
			}
			return Event{}, io.EOF
		}
	}
}

// readLine returns the next line without its terminator (LF, CRLF or CR) and
// the number of bytes it took from the stream. At the end of the stream it
// returns the unterminated rest (maybe empty) with io.EOF. A line longer than
// max yields ErrEventTooLarge. The line is valid until the next call.
//
// A line that fits the reader's buffer is gathered in r.line; the rest of a
// longer one in chunks, and joined at its exact size once its end is seen.
func (r *Reader) readLine(max int) ([]byte, int, error) {
	if cap(r.line) > 64*1024 {
		r.line = nil // do not hold on to the memory of one huge event
	}
	r.line = r.line[:0]
	defer r.release()
	n := 0
	for {
		if r.rpos == r.wpos && len(r.long) > 0 && r.err == nil {
			// A long line, its start gathered: the rest goes straight
			// into its chunks, without passing through buf.
			got, i := r.readDirect()
			if i >= 0 {
				r.lastLen += i
				r.skipLF = got[i] == '\r'
				r.keep(got[i+1:]) // the stream's next bytes
				return r.joined(nil), n + i + 1, nil
			}
			r.lastLen += len(got)
			if n += len(got); n > max {
				return nil, n, ErrEventTooLarge
			}
			continue
		}
		if r.rpos == r.wpos {
			if err := r.fill(); err != nil {
				if errors.Is(err, io.EOF) {
					return r.joined(nil), n, io.EOF
				}
				return nil, n, err
			}
		}
		buf := r.buf[r.rpos:r.wpos]
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.rpos++
				continue
			}
		}
		if i := lineBreak(buf); i >= 0 {
			line := r.joined(buf[:i])
			r.skipLF = buf[i] == '\r'
			r.rpos += i + 1
			return line, n + i + 1, nil
		}
		if n+len(buf) > max {
			return nil, n + len(buf), ErrEventTooLarge
		}
		if len(r.long) == 0 && len(r.line)+len(buf) <= bufSize {
			r.line = appendGrow(r.line, buf)
		} else {
			r.gather(buf)
		}
		r.rpos = r.wpos
		n += len(buf)
	}
}

// fill reads into the emptied buffer.
func (r *Reader) fill() error {
	if r.err != nil {
		return r.err
	}
	if len(r.buf) != bufSize {
		r.buf = make([]byte, bufSize) // after keep held more
	}
	m, err := readSome(r.src, r.buf)
	r.rpos, r.wpos, r.err = 0, m, err
	if m > 0 {
		return nil
	}
	return err
}

// readDirect reads into the room left in the long line's last chunk (a
// new chunk when it is full) and returns what came and the index of the
// first line break in it (-1: none). A read error is kept for fill.
func (r *Reader) readDirect() ([]byte, int) {
	if r.lastLen == chunkSize {
		r.long = append(r.long, r.chunks.get())
		r.lastLen = 0
	}
	room := r.long[len(r.long)-1][r.lastLen:]
	m, err := readSome(r.src, room)
	r.err = err
	return room[:m], lineBreak(room[:m])
}

// keep makes rest (read past a long line's end) the unread buffer.
func (r *Reader) keep(rest []byte) {
	if len(rest) > len(r.buf) {
		r.buf = make([]byte, len(rest))
	}
	r.rpos, r.wpos = 0, copy(r.buf, rest)
}

// readSome reads at least one byte or fails, as bufio does: a source that
// keeps returning nothing is an error, not a loop.
func readSome(src io.Reader, p []byte) (int, error) {
	for range 100 {
		if n, err := src.Read(p); n > 0 || err != nil {
			return n, err
		}
	}
	return 0, io.ErrNoProgress
}

// gather adds p to the chunks of a long line.
func (r *Reader) gather(p []byte) {
	for len(p) > 0 {
		if len(r.long) == 0 || r.lastLen == chunkSize {
			r.long = append(r.long, r.chunks.get())
			r.lastLen = 0
		}
		k := copy(r.long[len(r.long)-1][r.lastLen:], p)
		r.lastLen += k
		p = p[k:]
	}
}

// joined is the line gathered so far followed by rest: r.line itself for a
// short line, a new slice of the exact length for a long one.
func (r *Reader) joined(rest []byte) []byte {
	if len(r.long) == 0 {
		r.line = appendGrow(r.line, rest)
		return r.line
	}
	size := len(r.line) + (len(r.long)-1)*chunkSize + r.lastLen + len(rest)
	line := append(make([]byte, 0, size), r.line...)
	for i, k := range r.long {
		if i == len(r.long)-1 {
			line = append(line, k[:r.lastLen]...)
		} else {
			line = append(line, k[:]...)
		}
	}
	return append(line, rest...)
}

// release gives a long line's chunks back.
func (r *Reader) release() {
	for i, k := range r.long {
		r.chunks.put(k)
		r.long[i] = nil
	}
	r.long, r.lastLen = r.long[:0], 0
	if cap(r.long) == 0 {
		r.long = nil
	}
}

// appendGrow is append that at least doubles the capacity when it must
// grow, so a short line gathered from a few reads is copied once or twice.
func appendGrow(dst, src []byte) []byte {
	if len(dst)+len(src) > cap(dst) {
		grown := make([]byte, len(dst), max(2*cap(dst), len(dst)+len(src), 256))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, src...)
}

// parseRetry accepts only ASCII digits, as the standard requires.
func parseRetry(v []byte) (int, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(v))
	return n, err == nil
}

// Writer writes events to an HTTP response and flushes each one.
type Writer struct {
	w   http.ResponseWriter
	rc  http.ResponseController // finds Flush through wrapping writers; a value, not one more allocation per stream
	buf []byte                  // an event's framing and short lines, written in one go
}

// NewWriter sets the event-stream headers and returns a Writer. The caller
// must not have written the header yet.
func NewWriter(w http.ResponseWriter) *Writer {
	sw := NewWriterHeld(w)
	_ = sw.flush() // a gone client shows at the first write
	return sw
}

// A stream's response header values, shared by every stream: net/http
// only reads them, and a capacity equal to the length makes an append by
// anyone copy them.
var (
	valueEventStream = []string{"text/event-stream"}[:1:1]
	valueNoCache     = []string{"no-cache, no-transform"}[:1:1]
	valueNo          = []string{"no"}[:1:1]
)

// NewWriterHeld is NewWriter without the flush of the headers: they go out
// with the first event, in one write, so it is for a stream whose first
// event is written at once (a session stream's priming event).
func NewWriterHeld(w http.ResponseWriter) *Writer {
	h := w.Header()
	// The values made once (header.Set makes a slice per call); the keys
	// are canonical already.
	h["Content-Type"] = valueEventStream
	h["Cache-Control"] = valueNoCache
	h["X-Accel-Buffering"] = valueNo // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	return &Writer{w: w, rc: *http.NewResponseController(w)}
}

// errBadField is returned by Write for an id or event name that cannot be
// sent: one holding a line break (which would start a new field) or, for ids,
// a NUL (which readers ignore).
var errBadField = errors.New("sse: event id or name holds a line break or NUL")

// Write sends one event. Data may hold line breaks (LF, CRLF or CR); each line
// gets its own "data:" field, so a reader gets them back as LF. The id and the
// event name must not hold line breaks.
func (s *Writer) Write(ev Event) error { return s.WritePieces(ev, [][]byte{ev.Data}) }

// WriteLast sends the stream's last event without flushing it: the
// handler's return sends it with the end of the response, in one write
// instead of two. Nothing may be written after it.
func (s *Writer) WriteLast(ev Event) error { return s.WriteLastPieces(ev, [][]byte{ev.Data}) }

// WritePieces is Write for an event whose data is the concatenation of
// pieces (ev.Data is not used): a long line goes to the response from its
// own memory, not copied into the event's.
func (s *Writer) WritePieces(ev Event, pieces [][]byte) error {
	if err := s.write(ev, pieces); err != nil {
		return err
	}
	return s.flush()
}

// WriteLastPieces is WriteLast for data in pieces, as WritePieces.
func (s *Writer) WriteLastPieces(ev Event, pieces [][]byte) error { return s.write(ev, pieces) }

// directMin is the length from which a stretch of data without line breaks
// is written from its own memory; shorter ones are gathered in buf, which
// is written once it holds bufMax bytes.
// A buffer of at most keepMax bytes is kept for the next event: an idle
// stream (a session's GET stream) holds no more. A new buffer has room for
// at least minBuf bytes, which most events fit.
const (
	directMin = 1024
	bufMax    = 4096
	keepMax   = 512
	minBuf    = 256
)

func (s *Writer) write(ev Event, pieces [][]byte) error {
	if strings.ContainsAny(ev.ID, "\r\n\x00") || strings.ContainsAny(ev.Name, "\r\n") {
		return errBadField
	}
	b := s.buf[:0]
	if need := eventSize(ev, pieces); cap(b) < need {
		// One buffer for the whole event instead of one per field it
		// outgrows; room for a small next event too, as most are.
		b = make([]byte, 0, max(need, minBuf))
	}
	if ev.ID != "" {
		b = append(append(append(b, "id: "...), ev.ID...), '\n')
	}
	if ev.Name != "" {
		b = append(append(append(b, "event: "...), ev.Name...), '\n')
	}
	if ev.Retry > 0 {
		b = append(strconv.AppendInt(append(b, "retry: "...), int64(ev.Retry), 10), '\n')
	}
	b = append(b, "data: "...)
	var err error
	afterCR := false // the last piece ended in CR: an LF first in the next is part of that break
	for _, text := range pieces {
		if len(text) == 0 {
			continue
		}
		if afterCR && len(text) > 0 && text[0] == '\n' {
			text = text[1:]
		}
		afterCR = false
		for len(text) > 0 && err == nil {
			i := lineBreak(text)
			line := text
			if i >= 0 {
				line = text[:i]
			}
			if len(line) >= directMin {
				if b, err = s.put(b); err == nil {
					_, err = s.w.Write(line)
				}
			} else {
				b = append(b, line...)
			}
			if i < 0 {
				break
			}
			// Each line of the data gets its own field.
			b = append(b, "\ndata: "...)
			if text[i] == '\r' {
				if i+1 == len(text) {
					afterCR = true
				} else if text[i+1] == '\n' {
					i++
				}
			}
			text = text[i+1:]
			if len(b) >= bufMax {
				b, err = s.put(b)
			}
		}
	}
	if err == nil {
		b, err = s.put(append(b, "\n\n"...))
	}
	if cap(b) <= keepMax {
		s.buf = b[:0] // kept for the next event: a small one
	}
	return err
}

// eventSize is about the bytes write gathers of ev with its data in
// pieces when that has no line breaks: its fields, their names, the
// event's end, and the data unless it is long enough to go from its own
// memory.
func eventSize(ev Event, pieces [][]byte) int {
	n := len(ev.ID) + len(ev.Name) + len("id: \nevent: \nretry: 0000000000\ndata: \n\n")
	data := 0
	for _, p := range pieces {
		data += len(p)
	}
	if data < directMin {
		n += data
	}
	return n
}

// put writes b and returns it emptied.
func (s *Writer) put(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	_, err := s.w.Write(b)
	return b[:0], err
}

// lineBreak is the index of the first CR or LF in b, or -1: two byte
// searches, which are faster than one search for either byte.
func lineBreak(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	end := i
	if end < 0 {
		end = len(b)
	}
	if j := bytes.IndexByte(b[:end], '\r'); j >= 0 {
		return j
	}
	return i
}

// Comment sends a comment, used as a keep-alive. A text with line breaks
// becomes several comment lines.
func (s *Writer) Comment(text string) error {
	var b strings.Builder
	writeLines(&b, ": ", []byte(text))
	b.WriteByte('\n')
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return err
	}
	return s.flush()
}

// writeLines writes each line of text (split at CRLF, LF or CR) after prefix.
func writeLines(b *strings.Builder, prefix string, text []byte) {
	for {
		b.WriteString(prefix)
		i := lineBreak(text)
		if i < 0 {
			b.Write(text)
			b.WriteByte('\n')
			return
		}
		b.Write(text[:i])
		b.WriteByte('\n')
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}
}

// Flush sends what WriteLast left buffered (and the headers, if nothing
// was sent yet).
func (s *Writer) Flush() error { return s.flush() }

// flush sends what is buffered; a writer that cannot flush is not an
// error (the event goes out when the response ends).
func (s *Writer) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
