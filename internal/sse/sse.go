// Package sse reads and writes Server-Sent Events (the text/event-stream
// format of the HTML living standard), the framing both MCP HTTP transports
// use. It knows nothing of JSON-RPC.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
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
	br       *bufio.Reader
	maxEvent int
	lastID   string
}

// NewReader returns a Reader that refuses events larger than maxEvent bytes.
func NewReader(r io.Reader, maxEvent int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 32*1024), maxEvent: maxEvent}
}

// LastEventID is the id of the last event that carried one (for reconnects).
func (r *Reader) LastEventID() string { return r.lastID }

// Next returns the next event with data or a retry hint. Comments and empty
// events are skipped. It returns io.EOF at the end of the stream.
func (r *Reader) Next() (Event, error) {
	var ev Event
	var data bytes.Buffer
	hasData := false
	size := 0
	for {
		line, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole, still within the limit.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(buf) > r.maxEvent {
					return Event{}, ErrEventTooLarge
				}
				line, err = r.br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			if errors.Is(err, io.EOF) {
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		size += len(line)
		if size > r.maxEvent {
			return Event{}, ErrEventTooLarge
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if hasData || ev.Retry > 0 {
				ev.Data = data.Bytes()
				if ev.ID != "" {
					r.lastID = ev.ID
				}
				return ev, nil
			}
			ev, size = Event{}, 0
			if err != nil {
				return Event{}, io.EOF
			}
			continue
		}
		if line[0] == ':' {
			continue // comment / keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "event":
			ev.Name = string(value)
		case "id":
			if !bytes.ContainsRune(value, 0) {
				ev.ID = string(value)
			}
		case "retry":
			if n, convErr := strconv.Atoi(string(value)); convErr == nil && n >= 0 {
				ev.Retry = n
			}
		}
		if err != nil { // EOF without a blank line: dispatch what we have
			if hasData {
				ev.Data = data.Bytes()
				return ev, nil
			}
			return Event{}, io.EOF
		}
	}
}

// Writer writes events to an HTTP response and flushes each one.
type Writer struct {
	w http.ResponseWriter
	f http.Flusher
}

// NewWriter sets the event-stream headers and returns a Writer. The caller
// must not have written the header yet.
func NewWriter(w http.ResponseWriter) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	sw := &Writer{w: w, f: f}
	sw.flush()
	return sw
}

// Write sends one event. Data may hold newlines; each line gets its own
// "data:" field.
func (s *Writer) Write(ev Event) error {
	var b strings.Builder
	if ev.ID != "" {
		fmt.Fprintf(&b, "id: %s\n", ev.ID)
	}
	if ev.Name != "" {
		fmt.Fprintf(&b, "event: %s\n", ev.Name)
	}
	if ev.Retry > 0 {
		fmt.Fprintf(&b, "retry: %d\n", ev.Retry)
	}
	for _, line := range bytes.Split(ev.Data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(bytes.TrimSuffix(line, []byte("\r")))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return err
	}
	s.flush()
	return nil
}

// Comment sends a comment line, used as a keep-alive.
func (s *Writer) Comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.flush()
	return nil
}

func (s *Writer) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}
