package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// Stderr configures how a stdio child's stderr is logged. A child's
// stderr is its log (stdout carries the protocol), so it is logged, but
// bounded: one upstream cannot flood the gateway's log.
type Stderr struct {
	// Level is the log level of the lines: debug, info, warn or error.
	Level string `yaml:"level"`
	// Rate and Burst bound the lines logged for the upstream (all its
	// children together); the lines beyond are counted and summed up in a
	// periodic warning.
	Rate  Rate `yaml:"rate"`
	Burst int  `yaml:"burst"`
	// MaxLineBytes is how much of one line is logged; the rest is dropped.
	MaxLineBytes int `yaml:"max_line_bytes"`
}

// Stderr defaults and bounds.
const (
	// DefaultStderrLevel is info: the lines are the child's own log, often
	// the only account of why it fails, and the rate limit (not a level
	// nobody runs at) is what keeps a flood out of the gateway's log.
	DefaultStderrLevel        = "info"
	DefaultStderrBurst        = 100 // a whole traceback gets through
	DefaultStderrMaxLineBytes = 4096
	MinStderrMaxLineBytes     = 256
	MaxStderrMaxLineBytes     = 1 << 20
)

// DefaultStderrRate is 10 lines a second.
var DefaultStderrRate = Rate{N: 10, Per: time.Second}

// StderrLevels are the values of stderr.level.
var StderrLevels = []string{"debug", "info", "warn", "error"}

// stderrDefaults gives a command upstream its stderr settings.
func stderrDefaults(p string, u *Upstream, d *strictyaml.Decoder) {
	if _, hasCmd := u.kind(p, d); !hasCmd {
		return // an HTTP upstream has no stderr; validation reports the key
	}
	sp := strictyaml.JoinPath(p, "stderr")
	if u.Stderr == nil {
		u.Stderr = &Stderr{}
	}
	if !d.Set(strictyaml.JoinPath(sp, "level")) {
		u.Stderr.Level = DefaultStderrLevel
	}
	if !d.Set(strictyaml.JoinPath(sp, "rate")) {
		u.Stderr.Rate = DefaultStderrRate
	}
	if !d.Set(strictyaml.JoinPath(sp, "burst")) {
		u.Stderr.Burst = DefaultStderrBurst
	}
	if !d.Set(strictyaml.JoinPath(sp, "max_line_bytes")) {
		u.Stderr.MaxLineBytes = DefaultStderrMaxLineBytes
	}
}

// stderr validates upstreams.NAME.stderr.
func (v *validator) stderr(p string, u *Upstream, hasURL bool) {
	s := u.Stderr
	sp := strictyaml.JoinPath(p, "stderr")
	if s == nil {
		return
	}
	if hasURL {
		v.add(sp, "stderr applies only to command upstreams (a stdio child's stderr); remove it")
		return
	}
	if !slices.Contains(StderrLevels, s.Level) {
		v.add(strictyaml.JoinPath(sp, "level"), fmt.Sprintf("%q is not a log level; use one of %s (default %s)", s.Level, strings.Join(StderrLevels, ", "), DefaultStderrLevel))
	}
	if s.Rate.IsZero() {
		v.add(strictyaml.JoinPath(sp, "rate"), fmt.Sprintf("must be a rate above 0, e.g. 10/s; remove it for the default (%s)", DefaultStderrRate))
	}
	if s.Burst < 1 {
		v.add(strictyaml.JoinPath(sp, "burst"), fmt.Sprintf("must be at least 1; remove it for the default (%d)", DefaultStderrBurst))
	}
	if s.MaxLineBytes < MinStderrMaxLineBytes || s.MaxLineBytes > MaxStderrMaxLineBytes {
		v.add(strictyaml.JoinPath(sp, "max_line_bytes"), fmt.Sprintf("must be from %d to %d bytes; remove it for the default (%d)", MinStderrMaxLineBytes, MaxStderrMaxLineBytes, DefaultStderrMaxLineBytes))
	}
}
