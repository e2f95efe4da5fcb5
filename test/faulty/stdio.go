package faulty

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// maxStdinLine bounds one line the stdio server reads.
const maxStdinLine = 16 << 20

// ServeStdio serves newline-delimited JSON-RPC on in and out until in ends
// (nil) or a call asks for a crash (an error for which ErrCrash is true;
// the program then exits at once, as a crashing server would). Each request
// is served on its own goroutine, so a hung call does not stop the others;
// ServeStdio waits for them before it returns. The goroutine reading in
// ends when in does (EOF or close), which a crash does not wait for.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	c := &stdioConn{s: s, out: out, crashed: make(chan struct{})}
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// Connection-wide list changes are for legacy connections; a 2026-07-28
	// one hears of them on its subscriptions/listen stream.
	stop := s.listen(func(b []byte) {
		if !s.opts.Modern || c.initialized.Load() {
			c.write(b)
		}
	})
	defer stop()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := readLine(br)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.crashed:
			return errCrash
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case line := <-lines:
			msg, err := jsonrpc.Parse(line)
			if err != nil {
				var je *jsonrpc.Error
				if errors.As(err, &je) {
					c.send(jsonrpc.NewError(nil, je))
				}
				continue
			}
			switch msg.Kind() {
			case jsonrpc.KindNotification:
				if msg.Method == mcp.NotificationCancelled {
					c.inflight.cancel(msg.Params)
				}
			case jsonrpc.KindRequest:
				rctx, rcancel := context.WithCancel(ctx)
				c.inflight.track(json.RawMessage(msg.ID), rcancel)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.inflight.untrack(json.RawMessage(msg.ID))
					defer rcancel()
					c.serve(rctx, ctx, msg)
				}()
			}
		}
	}
}

// readLine reads one line of at most maxStdinLine bytes; longer lines are
// skipped whole.
func readLine(br *bufio.Reader) ([]byte, error) {
	for {
		var line []byte
		tooLong := false
		for {
			chunk, err := br.ReadSlice('\n')
			if len(line)+len(chunk) > maxStdinLine {
				tooLong, line = true, nil
			} else if !tooLong {
				line = append(line, chunk...)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && (len(line) == 0 || tooLong) {
				return nil, err
			}
			break
		}
		if line = bytes.TrimSpace(line); len(line) > 0 && !tooLong {
			return line, nil
		}
	}
}

// stdioConn is one stdio connection's writer and in-flight calls.
type stdioConn struct {
	s   *Server
	out io.Writer

	writeMu     sync.Mutex
	dead        atomic.Bool // crashed: nothing more is written
	initialized atomic.Bool // an initialize came: a legacy connection

	inflight inflight

	crashOnce sync.Once
	crashed   chan struct{}
}

func (c *stdioConn) write(b []byte) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.dead.Load() {
		return
	}
	_, _ = c.out.Write(append(append(make([]byte, 0, len(b)+1), b...), '\n'))
}

func (c *stdioConn) send(m *jsonrpc.Message) {
	b, err := jsonrpc.Encode(m)
	if err == nil {
		c.write(b)
	}
}

func (c *stdioConn) crash() {
	c.dead.Store(true)
	c.crashOnce.Do(func() { close(c.crashed) })
}

// serve answers one request; ctx is the request's (cancelled by
// notifications/cancelled), life the connection's (hang waits for it).
func (c *stdioConn) serve(ctx, life context.Context, msg *jsonrpc.Message) {
	mod := modern(msg)
	if msg.Method == mcp.MethodInitialize {
		c.initialized.Store(true)
	}
	if msg.Method == mcp.MethodSubscriptionsListen && c.s.opts.Modern {
		c.listen(ctx, msg)
		return
	}
	f, ok := isFault(msg)
	if !ok {
		c.send(complete(c.s.answer(msg), mod))
		return
	}
	c.s.count(f.Kind)
	answer := func(extra ...string) { c.send(complete(jsonrpc.NewResult(msg.ID, result(f.Token, 0, extra...)), mod)) }
	token := progressToken(msg.Params)
	switch f.Kind {
	case Echo:
		answer()
	case Slow:
		if !progressEvery(ctx, f, func(i, n int) { c.write(notification(token, i, n)) }) {
			return // cancelled: no answer, as the spec asks
		}
		answer()
	case Hang:
		<-life.Done()
	case Crash, Reset, Expire:
		if sleep(life, f.Delay) {
			c.crash()
		}
	case Garbage:
		for _, g := range garbage(f.Bytes) {
			c.write(g)
		}
		answer()
	case Huge:
		c.send(complete(jsonrpc.NewResult(msg.ID, result(f.Token, f.Bytes)), mod))
	case Stderr:
		flood(c.s.opts.Stderr, f.Bytes)
		answer()
	case Drop:
		for i := 1; i <= f.Events; i++ {
			c.write(notification(token, i, f.Events))
		}
		if !sleep(ctx, f.Delay) {
			return
		}
		answer()
	case ListChanged:
		c.s.changeTools() // the notification reaches us as a listener
		answer()
	case Grandchild:
		pid, err := c.s.opts.Grandchild()
		if err != nil {
			c.send(jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "grandchild: %v", err)))
			return
		}
		answer("pid " + strconv.Itoa(pid))
	}
}

// listen serves subscriptions/listen: an acknowledgement, then each tool
// list change, all tagged with the request's id, until it is cancelled.
func (c *stdioConn) listen(ctx context.Context, msg *jsonrpc.Message) {
	tools, ack := listenParams(msg)
	if tools {
		// Listening before the acknowledgement goes out: a client that
		// changes the list as soon as it is acknowledged hears of it.
		stop := c.s.listen(func([]byte) { c.write(tagged(mcp.NotificationToolsListChanged, msg.ID, nil)) })
		defer stop()
	}
	c.write(tagged(mcp.NotificationSubscriptionsAcked, msg.ID, map[string]any{"notifications": ack}))
	<-ctx.Done()
}

// sleep waits d, reporting false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// progressEvery calls notify f.Events times spread over f.Delay and reports
// whether the whole delay passed without ctx ending.
func progressEvery(ctx context.Context, f Fault, notify func(i, n int)) bool {
	n := f.Events
	if n <= 0 {
		return sleep(ctx, f.Delay)
	}
	step := f.Delay / time.Duration(n)
	for i := 1; i <= n; i++ {
		if !sleep(ctx, step) {
			return false
		}
		notify(i, n)
	}
	return true
}
