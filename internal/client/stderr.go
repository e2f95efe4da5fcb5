package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/time/rate"

	"github.com/mcpgw/mcpgw/internal/metrics"
)

// A stdio child's stderr is its log (stdout carries the protocol), so the
// gateway logs it — but a child must not be able to flood the gateway's log
// (one printing in a loop wrote 3 GB in half a minute), and what the
// gateway's own server/discover probe provokes (a legacy server's page of
// validation errors) is neither news to the operator nor a clue to a
// later crash.

// Defaults of StderrOptions.
const (
	DefaultStderrRate         = 10  // lines per second
	DefaultStderrBurst        = 100 // a whole traceback gets through
	DefaultStderrMaxLineBytes = 4096
	DefaultStderrSummary      = 10 * time.Second
)

// stderrTailLines and stderrTailBytes bound the "last stderr" tail kept for
// error messages.
const (
	stderrTailLines = 3
	stderrTailBytes = 300
)

// StderrOptions configure a StderrLog.
type StderrOptions struct {
	// Logger receives the lines; it is scoped to the upstream.
	Logger *zap.Logger
	// Level is the level lines are logged at (default info). Lines written
	// while the child answers the gateway's probe are logged at debug.
	Level zapcore.Level
	// Rate (lines per second) and Burst bound the lines logged; the lines
	// beyond are counted and reported in a summary line (defaults 10, 100).
	Rate  float64
	Burst int
	// MaxLineBytes is how much of one line is kept (default 4096); the rest
	// of a longer line is read and discarded.
	MaxLineBytes int
	// SummaryEvery is how long after a first dropped line the summary
	// ("N stderr lines dropped in the last T") is logged (default 10s).
	SummaryEvery time.Duration
	// Setting is the config path of these options, named in the summary
	// (e.g. "upstreams.fs.stderr").
	Setting string
	// Metrics counts the lines (nil: not counted).
	Metrics *metrics.Upstream
	// Now and AfterFunc are the clock (defaults time.Now, time.AfterFunc).
	Now       func() time.Time
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// StderrLog logs the stderr lines of one upstream's children at a
// configured level and rate. One is shared by all of an upstream's
// children (its shared connection, per-session and capability-view
// connections), so the bound is per upstream however many children run.
type StderrLog struct {
	opts StderrOptions
	lim  *rate.Limiter

	mu      sync.Mutex
	dropped int64     // since `since`, not yet reported
	since   time.Time // the first unreported drop
	stop    func() bool
	closed  bool
}

// NewStderrLog returns a StderrLog; Close reports what it dropped last.
func NewStderrLog(opts StderrOptions) *StderrLog {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Rate <= 0 {
		opts.Rate = DefaultStderrRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultStderrBurst
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultStderrMaxLineBytes
	}
	if opts.SummaryEvery <= 0 {
		opts.SummaryEvery = DefaultStderrSummary
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AfterFunc == nil {
		opts.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if opts.Setting == "" {
		opts.Setting = "stderr"
	}
	return &StderrLog{opts: opts, lim: rate.NewLimiter(rate.Limit(opts.Rate), opts.Burst)}
}

// Line logs one line (without its newline). clippedFrom is the line's full
// length when it was longer than MaxLineBytes (else 0); probe marks a line
// written while the child answered the gateway's probe.
func (l *StderrLog) Line(line string, clippedFrom int64, probe bool) {
	level := l.opts.Level
	if probe {
		level = zapcore.DebugLevel
	}
	ce := l.opts.Logger.Check(level, "child stderr")
	if ce == nil {
		// Below the log level: nothing to bound, and no token spent.
		l.opts.Metrics.StderrLine(metrics.StderrSuppressed, probe)
		return
	}
	if !l.lim.AllowN(l.opts.Now(), 1) {
		l.drop()
		l.opts.Metrics.StderrLine(metrics.StderrDropped, probe)
		return
	}
	fields := []zap.Field{zap.String("line", line)}
	if clippedFrom > 0 {
		fields = append(fields, zap.Int64("clipped_from_bytes", clippedFrom))
	}
	if probe {
		fields = append(fields, zap.Bool("probe", true))
	}
	ce.Write(fields...)
	l.opts.Metrics.StderrLine(metrics.StderrLogged, probe)
}

func (l *StderrLog) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped == 0 {
		l.since = l.opts.Now()
		if !l.closed {
			l.stop = l.opts.AfterFunc(l.opts.SummaryEvery, l.Flush)
		}
	}
	l.dropped++
}

// Flush logs the summary of the lines dropped since the last one, if any.
// It runs SummaryEvery after a first drop, when a child's stderr ends
// (right before the error that says why it ended) and on Close.
func (l *StderrLog) Flush() {
	l.mu.Lock()
	n, since := l.dropped, l.since
	l.dropped = 0
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
	l.mu.Unlock()
	if n == 0 {
		return
	}
	period := l.opts.Now().Sub(since).Round(time.Millisecond)
	l.opts.Logger.Warn(fmt.Sprintf("%d stderr lines dropped in the last %s", n, period),
		zap.Int64("dropped", n), zap.Duration("period", period),
		zap.String("limit", fmt.Sprintf("%g/s, burst %d", l.opts.Rate, l.opts.Burst)),
		zap.String("fix", "the child writes more than "+l.opts.Setting+" lets through: quiet it, or raise "+l.opts.Setting+".rate and .burst"))
}

// Close reports the last drops; lines still arriving (children being
// stopped) are logged and counted as before, their drops reported when
// their stderr ends.
func (l *StderrLog) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.Flush()
}

// maxLine is how much of a line is kept.
func (l *StderrLog) maxLine() int { return l.opts.MaxLineBytes }

// stderrPipe is the read end of a child's stderr. It counts the bytes read
// so that mark can tell where in the stream the child is now.
type stderrPipe struct {
	f  *os.File
	rc syscall.RawConn

	mu   sync.Mutex // held over each (non-blocking) read, and by mark
	read int64      // bytes read so far
}

func newStderrPipe(f *os.File) (*stderrPipe, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &stderrPipe{f: f, rc: rc}, nil
}

func (p *stderrPipe) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	err := p.rc.Read(func(fd uintptr) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		n, rerr = syscall.Read(int(fd), b)
		if errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EINTR) {
			return false // wait until readable
		}
		if n > 0 {
			p.read += int64(n)
		}
		return true
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}

// mark is the stream offset just past everything the child has written to
// stderr so far: the bytes read plus those waiting in the pipe, taken
// together under mu so that a read cannot move bytes from one to the other
// in between.
func (p *stderrPipe) mark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	pending := 0
	_ = p.rc.Control(func(fd uintptr) { pending = pipePending(fd) })
	return p.read + int64(pending)
}

func (p *stderrPipe) Close() error { return p.f.Close() }

// probeWindow is the stretch of a child's stderr written while it answered
// the gateway's server/discover probe: from what it had written when the
// probe was sent to what it had written when the answer (or the probe's
// timeout) came. A server writes what a request provokes before it
// answers, so this is exactly what the probe provoked — unless the server
// logged something unrelated at the same moment, a fair price.
type probeWindow struct {
	mu         sync.Mutex
	started    bool
	start, end int64 // end < 0 while the probe is out
}

func (w *probeWindow) begin(at int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started, w.start, w.end = true, at, -1
}

func (w *probeWindow) finish(at int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started && w.end < 0 {
		w.end = at
	}
}

// holds reports whether the line starting at stream offset off is in the window.
func (w *probeWindow) holds(off int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started && off >= w.start && (w.end < 0 || off < w.end)
}

// open reports whether the probe is still out.
func (w *probeWindow) open() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started && w.end < 0
}

// tail keeps a child's last stderr lines for error messages: those of the
// probe apart, so that they name the cause only of a child that died
// answering the probe.
type tail struct {
	mu           sync.Mutex
	lines, probe []string
}

func (t *tail) add(line string, probe bool) {
	line = string(clipUTF8([]byte(line), stderrTailBytes))
	t.mu.Lock()
	defer t.mu.Unlock()
	dst := &t.lines
	if probe {
		dst = &t.probe
	}
	*dst = append(*dst, line)
	if len(*dst) > stderrTailLines {
		*dst = append((*dst)[:0], (*dst)[len(*dst)-stderrTailLines:]...)
	}
}

// text is the "; last stderr: ..." suffix of an error message.
// duringProbe selects the probe's lines (the child died answering it).
func (t *tail) text(duringProbe bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if duringProbe && len(t.probe) > 0 {
		lines = t.probe
	}
	if len(lines) == 0 {
		return ""
	}
	return "; last stderr: " + strings.Join(lines, " | ")
}

// readStderrLine reads one line of at most max bytes kept (without the
// newline); the rest of a longer line is read and discarded. n is how many
// bytes of the stream the line took, newline included, and full its length
// without the newline.
func readStderrLine(br *bufio.Reader, max int) (line []byte, n, full int64, err error) {
	for {
		chunk, rerr := br.ReadSlice('\n')
		n += int64(len(chunk))
		data := chunk
		if rerr == nil {
			data = chunk[:len(chunk)-1]
		}
		full += int64(len(data))
		if room := max - len(line); room > 0 {
			line = append(line, data[:min(room, len(data))]...)
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		return line, n, full, rerr
	}
}

// clipUTF8 cuts b to at most n bytes without leaving a UTF-8 sequence cut
// in half at its end.
func clipUTF8(b []byte, n int) []byte {
	if len(b) > n {
		b = b[:n]
	}
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return b
}
