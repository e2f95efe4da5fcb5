package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// StdioConfig describes a child process speaking newline-delimited JSON-RPC.
type StdioConfig struct {
	// Argv is the command and its arguments; no shell is involved.
	Argv []string
	// Env is the child's own variables, on top of the minimal environment
	// it gets from the gateway's (config.ChildBaseEnv) and InheritEnv.
	Env map[string]string
	// InheritEnv names more of the gateway's variables the child gets:
	// exact names, or a prefix ending in "*" (NPM_CONFIG_*; "*" alone is
	// every variable). Explicit and per upstream, because whatever a child
	// gets, a compromised child can print.
	InheritEnv []string
	// Environ is the gateway's environment (nil: os.Environ).
	Environ func() []string
	// Dir is the working directory ("" = the gateway's).
	Dir string
	// MaxLineBytes caps one stdout line; longer lines are dropped and counted.
	MaxLineBytes int
	// Logger receives transport events.
	Logger *zap.Logger
	// Stderr logs the child's stderr lines; it is the upstream's, shared by
	// all its children (nil: one of the transport's own, with defaults).
	Stderr *StderrLog
	// StopGrace is how long the child gets after stdin closes, and again
	// after SIGTERM, before the next step (default 2s).
	StopGrace time.Duration
	// Sandbox confines the child (sandbox.go); nil: unconfined.
	Sandbox *SandboxConfig
}

// StdioStats counts what the transport had to throw away.
type StdioStats struct {
	// NonJSONLines are stdout lines that were not JSON-RPC (a server printing
	// banners on stdout, for example).
	NonJSONLines int64
	// OversizedLines are stdout lines over MaxLineBytes.
	OversizedLines int64
}

// Stdio is the transport to a child process. The child runs in its own
// process group so that stopping it also stops anything it spawned (an npx
// wrapper's node grandchild, for example).
type Stdio struct {
	cfg StdioConfig
	log *zap.Logger

	cmd   *exec.Cmd
	stdin *os.File

	writeMu sync.Mutex
	wbuf    []byte // the line being written (guarded by writeMu)

	nonJSON   atomic.Int64
	oversized atomic.Int64

	stderr    *StderrLog
	ownStderr bool        // stderr is the transport's own, closed with it
	errPipe   *stderrPipe // set by Start
	probe     probeWindow // the stretch of stderr the gateway's probe provoked
	tail      tail        // last lines, for error messages

	done     chan struct{}
	doneOnce sync.Once
	err      error
	exited   chan struct{} // closed when Wait returns
	errDone  chan struct{} // closed when the stderr reader is done
	wg       sync.WaitGroup
}

// NewStdio returns an unstarted stdio transport.
func NewStdio(cfg StdioConfig) *Stdio {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = 8 << 20
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 2 * time.Second
	}
	s := &Stdio{cfg: cfg, log: cfg.Logger, stderr: cfg.Stderr, done: make(chan struct{}), exited: make(chan struct{}), errDone: make(chan struct{})}
	if s.stderr == nil {
		s.stderr, s.ownStderr = NewStderrLog(StderrOptions{Logger: cfg.Logger}), true
	}
	return s
}

// Stats returns the transport's counters.
func (s *Stdio) Stats() StdioStats {
	return StdioStats{NonJSONLines: s.nonJSON.Load(), OversizedLines: s.oversized.Load()}
}

// PID is the child's process id (0 before Start).
func (s *Stdio) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Start spawns the child.
func (s *Stdio) Start(_ context.Context, deliver DeliverFunc) error {
	if len(s.cfg.Argv) == 0 || s.cfg.Argv[0] == "" {
		return errors.New("stdio: empty command")
	}
	cmd := exec.Command(s.cfg.Argv[0], s.cfg.Argv[1:]...)
	cmd.Dir = s.cfg.Dir
	environ := s.cfg.Environ
	if environ == nil {
		environ = os.Environ
	}
	cmd.Env = ChildEnv(environ(), s.cfg.InheritEnv, s.cfg.Env) // never nil, which would be the whole environment
	// No Pdeathsig: Go ties it to the spawning OS thread, not the process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// Our own pipes rather than cmd.StdoutPipe: reads may go on after Wait
	// returns, and Wait must not close them under the reader.
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return err
	}
	errPipe, err := newStderrPipe(errR)
	if err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	sb, err := s.sandbox(cmd) // sandbox.go: rewrites cmd to start confined
	if err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return err
	}
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		s.sandboxExited(sb)
		return fmt.Errorf("start %q: %w", s.cfg.Argv[0], err)
	}
	closeAll(inR, outW, errW) // the child has its copies
	sb.Started()              // the sandbox's egress proxy, if any, begins
	s.cmd, s.stdin, s.errPipe = cmd, inW, errPipe
	s.log.Info("started child process", zap.Int("pid", cmd.Process.Pid), zap.Strings("argv", s.cfg.Argv))

	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.readStdout(outR, deliver)
	}()
	go func() {
		defer s.wg.Done()
		defer close(s.errDone)
		s.readStderr(errPipe)
	}()
	go func() {
		defer s.wg.Done()
		werr := cmd.Wait()
		close(s.exited)
		if werr == nil {
			werr = errors.New("exited with status 0")
		}
		// Let the stderr reader take the child's last lines (why it died)
		// before they go into the error; grandchildren holding stderr
		// open must not delay it long.
		select {
		case <-s.errDone:
		case <-time.After(100 * time.Millisecond):
		}
		// A child that died answering the probe is explained by what the
		// probe provoked; any other by its last lines of its own.
		s.fail(fmt.Errorf("child process %s%s%s", describeExit(werr), s.sandboxExited(sb), s.tail.text(s.probe.open())))
	}()
	return nil
}

func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return "exited: " + ee.Error()
	}
	return err.Error()
}

func (s *Stdio) readStdout(r *os.File, deliver DeliverFunc) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64*1024)
	max := s.cfg.MaxLineBytes
	for {
		line, err := readLine(br, max)
		switch {
		case errors.Is(err, errLineTooLong):
			n := s.oversized.Add(1)
			id := oversizedAnswerID(line)
			s.log.Warn("dropped an oversized stdout line from the child; raise max_line_bytes if it is legitimate",
				zap.Int("max_line_bytes", max), zap.Int64("dropped_total", n), zap.ByteString("answer_to", id))
			if id != nil {
				// Its caller is answered now, naming the bound, rather than
				// left to wait out the upstream timeout for an answer that
				// has already gone by.
				deliver(oversizedError(id, max), nil)
			}
			continue
		case err != nil:
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.fail(fmt.Errorf("reading child stdout: %w", err))
				return
			}
			// Usually stdout ends because the child exited: give its exit
			// status a moment to arrive, so the error says why (killed by a
			// signal, exit code) rather than only that stdout closed.
			select {
			case <-s.exited:
				return // the waiter reports the exit
			case <-time.After(100 * time.Millisecond):
				s.fail(errors.New("child closed its stdout"))
			}
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			// Banners and debug prints on stdout are a common server bug; skip
			// them rather than fail the connection.
			n := s.nonJSON.Add(1)
			s.log.Debug("skipped a non-JSON-RPC stdout line from the child", zap.ByteString("line", clip(line, 200)), zap.Int64("skipped_total", n))
			continue
		}
		deliver(line, nil) // stdio gives no request association
	}
}

var errLineTooLong = errors.New("line too long")

// oversizedHeadBytes is how much of an over-long line readLine keeps, for
// oversizedAnswerID: enough for the envelope members a server writes
// before its result.
const oversizedHeadBytes = 4096

// readLine reads one '\n'-terminated line of at most max bytes. A longer line
// is consumed to its end and reported as errLineTooLong, with its first
// bytes (at most oversizedHeadBytes).
//
// The line is allocated once, at its size: a line longer than the reader's
// buffer (a large tool result) is kept as copies of each full buffer and
// joined at its end, as bufio.Reader.ReadBytes does, rather than grown by
// append (about eight copies of a 1 MiB line).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var full [][]byte // copies of the buffers a long line filled
	var head []byte   // the first bytes of a line found too long
	size := 0
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong && size+len(chunk) > max+1 { // +1: the newline itself
			for _, f := range full {
				head = appendUpTo(head, f, oversizedHeadBytes)
			}
			head = appendUpTo(head, chunk, oversizedHeadBytes)
			tooLong, full = true, nil
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !tooLong {
				full = append(full, bytes.Clone(chunk))
				size += len(chunk)
			}
			continue
		case err == nil && tooLong:
			return head, errLineTooLong
		case err != nil && (tooLong || size+len(chunk) == 0 || !errors.Is(err, io.EOF)):
			return nil, err
		}
		// The line's end (or the stream's, with an unterminated rest).
		line := make([]byte, 0, size+len(chunk))
		for _, f := range full {
			line = append(line, f...)
		}
		return append(line, chunk...), nil
	}
}

func appendUpTo(dst, b []byte, limit int) []byte {
	if room := limit - len(dst); room < len(b) {
		b = b[:max(room, 0)]
	}
	return append(dst, b...)
}

// oversizedAnswerID reads the id of the response an over-long line began,
// from its first bytes: the line is a JSON object whose top-level members,
// up to the first "result" or "error", hold exactly one "id" (a string or a
// number) and no "method". Anything else (a server request, an id written
// after the result, a member repeated or unreadable) gives nil: no call is
// guessed at, and the one waiting keeps its timeout. Only the top level is
// read, so an "id" inside a result never counts.
func oversizedAnswerID(head []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var id json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return nil
		}
		switch key {
		case "result", "error":
			return id
		case "method":
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" {
			if id != nil || !(v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
				return nil // twice, or null/an object: not an id to answer
			}
			id = v
		}
	}
	return nil // the whole object in the head: no result member seen
}

// oversizedError is the answer given in place of an over-long one.
func oversizedError(id []byte, limit int) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, id...)
	return fmt.Appendf(b, `,"error":{"code":-32603,"message":"the upstream's answer is longer than its max_line_bytes (%d bytes) and was dropped; raise max_line_bytes for this upstream if such answers are legitimate"}}`, limit)
}

// readStderr logs the child's stderr line by line (through the upstream's
// StderrLog, which bounds the rate) and keeps the last lines for error
// messages. It reads to the end however much is dropped, so that the
// child never blocks on a full pipe.
func (s *Stdio) readStderr(r *stderrPipe) {
	defer r.Close()
	defer s.stderr.Flush()
	br := bufio.NewReaderSize(r, 4096)
	max := s.stderr.maxLine()
	var off int64 // stream offset of the next line
	for {
		line, n, full, err := readStderrLine(br, max)
		start := off
		off += n
		var clippedFrom int64
		if full > int64(len(line)) {
			clippedFrom = full
			line = clipUTF8(line, len(line))
		}
		if text := strings.TrimSpace(string(line)); text != "" {
			probe := s.probe.holds(start)
			s.stderr.Line(text, clippedFrom, probe)
			s.tail.add(text, probe)
			s.sandboxStderr(text) // sandbox.go: counts reported permission errors
		}
		if err != nil {
			return
		}
	}
}

// beginProbe and endProbe bracket the gateway's server/discover probe: the
// stderr lines written meanwhile are its doing (see probeWindow).
func (s *Stdio) beginProbe() {
	if s.errPipe != nil {
		s.probe.begin(s.errPipe.mark())
	}
}

func (s *Stdio) endProbe() {
	if s.errPipe != nil {
		s.probe.finish(s.errPipe.mark())
	}
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// Send writes one line to the child's stdin.
func (s *Stdio) Send(ctx context.Context, msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		// Newline-delimited framing: pretty-printed JSON must be compacted
		// (inside JSON strings a newline is always escaped, so this only
		// removes whitespace between tokens).
		var buf bytes.Buffer
		if err := json.Compact(&buf, msg); err != nil {
			return fmt.Errorf("stdio: message is not valid JSON: %w", err)
		}
		msg = buf.Bytes()
	}
	select {
	case <-s.done:
		return s.Err()
	default:
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// A child that stops reading must not wedge the gateway forever.
	if dl, ok := ctx.Deadline(); ok {
		_ = s.stdin.SetWriteDeadline(dl)
	} else {
		_ = s.stdin.SetWriteDeadline(time.Now().Add(30 * time.Second))
	}
	// One write per message (a line must not interleave with another's),
	// from a buffer kept between writes rather than made per message; one
	// grown past maxKeptWriteBuf by a big message is not kept.
	s.wbuf = append(append(s.wbuf[:0], msg...), '\n')
	_, err := s.stdin.Write(s.wbuf)
	if cap(s.wbuf) > maxKeptWriteBuf {
		s.wbuf = nil
	}
	if err != nil {
		return fmt.Errorf("write to child stdin: %w", err)
	}
	return nil
}

// maxKeptWriteBuf bounds the write buffer a stdio transport keeps.
const maxKeptWriteBuf = 64 << 10

// Done is closed when the child exits or its stdout ends.
func (s *Stdio) Done() <-chan struct{} { return s.done }

// Err says why the transport ended.
func (s *Stdio) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

func (s *Stdio) fail(err error) {
	s.doneOnce.Do(func() {
		s.err = err
		close(s.done)
	})
}

// Close stops the child as the MCP spec asks: close its stdin, wait, then
// SIGTERM, wait, then SIGKILL — each signal sent to the whole process group.
func (s *Stdio) Close() error {
	if s.ownStderr {
		defer s.stderr.Close()
	}
	if s.cmd == nil {
		return nil
	}
	s.fail(errors.New("closed by the gateway"))
	s.writeMu.Lock()
	_ = s.stdin.Close()
	s.writeMu.Unlock()
	pgid := s.cmd.Process.Pid
	select {
	case <-s.exited:
	case <-time.After(s.cfg.StopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(s.cfg.StopGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-s.exited
		}
	}
	// Grandchildren that outlived the leader still hold our pipes open.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	s.wg.Wait()
	return nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}
