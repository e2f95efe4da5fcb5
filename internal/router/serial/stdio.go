package serial

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/router/core"
	"github.com/mcpgw/mcpgw/internal/router/edge"
)

// errSessionEnded is returned by ServeStdio when its session is ended from
// elsewhere (the router closing).
var errSessionEnded = errors.New("mcpgw: the stdio session was ended by the gateway")

// ServeStdio serves one session of rte over the MCP stdio transport: newline-delimited JSON-RPC
// messages are read from r, and everything for the client — responses,
// what upstreams send during a call, session notifications — is written to
// w, one compact message per line and one writer at a time. Requests run
// concurrently. Blank lines are skipped; a line that is not a JSON-RPC
// message is answered with an error (-32700 when it is not JSON); a line
// longer than max_body_bytes is discarded and answered with an error.
// 2026-07-28 requests need no initialize (stdio2026.go).
//
// ServeStdio returns nil when r reaches EOF and every request read has been
// answered; ctx.Err() when ctx ends, after cancelling what is in flight; or
// the error reading r or writing w. When it returns because of ctx or a
// write error, the goroutine reading r ends at r's next line or EOF, and
// touches nothing after that.
func (t *Transport) ServeStdio(ctx context.Context, r io.Reader, w io.Writer, rte *core.Route) error {
	c, err := t.newPushConn(rte, "stdio", nil) // stdio has no credentials: the local user
	if err != nil {
		return err
	}
	c.modern = newModern() // 2026-07-28 requests beside the session (stdio2026.go)
	t.log.Info("serving MCP on stdio", zap.String("route", rte.Path), zap.Strings("upstreams", rte.View.Upstreams()))

	stopWriter := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() { writerDone <- c.writeLines(w, stopWriter) }()
	stopWriting := func() error {
		close(stopWriter)
		return <-writerDone
	}
	finish := func() error {
		c.stop()
		return stopWriting()
	}

	lines := make(chan stdioLine)
	quit := make(chan struct{})
	defer close(quit)
	go readLines(r, int(rte.Gen.MaxBody), lines, quit)

	for {
		select {
		case l := <-lines:
			if l.err != nil {
				// The client can send nothing more: relayed requests cannot
				// be answered, but every request read gets its response.
				c.noInput.Store(true)
				c.refuseOutgoing()
				c.modern.inputEnded() // listen streams answer and end
				if !c.finishInFlight(ctx) {
					_ = stopWriting()
					return ctx.Err()
				}
				werr := stopWriting()
				if errors.Is(l.err, io.EOF) {
					return werr
				}
				return fmt.Errorf("reading stdin: %w", l.err)
			}
			c.line(l)
		case <-ctx.Done():
			_ = finish()
			return ctx.Err()
		case <-c.sess.Context().Done():
			if werr := finish(); werr != nil {
				return werr
			}
			return errSessionEnded
		}
	}
}

// finishInFlight lets every request already read finish and be answered,
// then ends the session. It reports false when ctx ended first, in which
// case what was still running has been cancelled.
func (c *pushConn) finishInFlight(ctx context.Context) bool {
	c.mu.Lock()
	c.closed = true // nothing new starts, so nothing is added to c.wg
	c.mu.Unlock()
	idle := make(chan struct{})
	go func() { // ends with the last request, at the latest when the session ends
		c.wg.Wait()
		close(idle)
	}()
	ok := true
	select {
	case <-idle:
	case <-ctx.Done():
		ok = false
		c.t.sessions.Remove(c.sess.ID()) // cancels what is in flight
		<-idle
	}
	c.t.sessions.Remove(c.sess.ID())
	return ok
}

// stdioLine is one line read from stdin, or the error that ended reading.
type stdioLine struct {
	b       []byte
	tooLong bool
	err     error
}

// readLines sends each line of r (without its line break) to lines, then
// the error that ended reading (io.EOF at the end). It stops early once
// quit is closed.
func readLines(r io.Reader, max int, lines chan<- stdioLine, quit <-chan struct{}) {
	br := bufio.NewReaderSize(r, 64<<10)
	send := func(l stdioLine) bool {
		select {
		case lines <- l:
			return true
		case <-quit:
			return false
		}
	}
	for {
		b, tooLong, err := readLine(br, max)
		if len(b) > 0 || tooLong {
			if !send(stdioLine{b: b, tooLong: tooLong}) {
				return
			}
		}
		if err != nil {
			send(stdioLine{err: err})
			return
		}
	}
}

// readLine reads up to the next LF. A line longer than max is read to its
// end and discarded: tooLong is set and b is nil.
func readLine(br *bufio.Reader, max int) (b []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(b)+len(frag) > max+2 { // +2: the CRLF is not the message's
				tooLong, b = true, nil
			} else {
				b = append(b, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return b, tooLong, err
	}
}

// line handles one line from stdin.
func (c *pushConn) line(l stdioLine) {
	if l.tooLong {
		c.reply(jsonrpc.NewError(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "message exceeds max_body_bytes (%d bytes); it was discarded", c.sess.Route().Gen.MaxBody)))
		return
	}
	b := bytes.Trim(l.b, " \t\r\n")
	if len(b) == 0 {
		return
	}
	msg, perr := edge.ParseMessage(b)
	if perr != nil {
		c.reply(perr)
		return
	}
	var lr *limits.Refusal
	if err := c.handle(msg); errors.As(err, &lr) {
		// sessions.max_requests_per_session: answered from the reading
		// loop, which waits for room — a client that sends without
		// reading its answers is held back rather than queued for.
		c.emitMessage(jsonrpc.NewError(msg.ID, lr.JSONRPC()))
	}
}

// reply queues an answer the caller already has.
func (c *pushConn) reply(m *jsonrpc.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.replyLocked(m)
	}
}

// writeLines is the stdio writer: each message the session sends becomes
// one line of w. After stop is closed it writes what is still queued and
// returns. A write error ends the session.
func (c *pushConn) writeLines(w io.Writer, stop <-chan struct{}) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var werr error
	write := func(b []byte) {
		if werr != nil {
			return
		}
		_, _ = bw.Write(oneLine(b))
		_ = bw.WriteByte('\n')
		// Flush when nothing else is ready to go: one syscall for a burst.
		if len(c.out) == 0 && len(c.sess.Outbox()) == 0 {
			werr = bw.Flush()
		}
		if werr != nil {
			c.t.log.Warn("cannot write to stdout; ending the stdio session", zap.Error(werr))
			c.t.sessions.Remove(c.sess.ID())
		}
	}
	for {
		select {
		case b := <-c.out:
			c.taken(b)
			write(b)
		case b := <-c.sess.Outbox():
			if c.initialized() {
				write(b)
			}
		case <-stop:
			for len(c.out) > 0 {
				b := <-c.out
				c.taken(b)
				write(b)
			}
			if werr == nil {
				werr = bw.Flush()
			}
			if werr != nil {
				return fmt.Errorf("writing stdout: %w", werr)
			}
			return nil
		}
	}
}

// oneLine returns b without line breaks: the stdio transport frames
// messages by LF. Payloads are forwarded as their upstream wrote them,
// which may be pretty-printed JSON; a raw CR or LF in JSON can only be
// whitespace between tokens, so compacting loses nothing.
func oneLine(b []byte) []byte {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) == nil {
		return buf.Bytes()
	}
	return bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, b)
}
