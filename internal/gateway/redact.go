package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/internal/config"
)

// redactSecrets wraps log so that no line it writes contains one of the
// config's secrets (config.Secrets: upstream header and env values, OAuth
// client secrets, API keys). The config types already log themselves
// redacted; this catches what reaches a log line by another way, such as a
// stdio child printing its token on stderr or an upstream echoing a header
// in an error body. It costs nothing for lines below the level, and a
// string search per field for lines written.
func redactSecrets(log *zap.Logger, secrets []string) *zap.Logger {
	if len(secrets) == 0 {
		return log
	}
	l, _ := redactingLogger(log, secrets)
	return l
}

// redactingLogger is redactSecrets that also returns the redactor, so that
// a reload can add the new config's secrets (redactor.add).
func redactingLogger(log *zap.Logger, secrets []string) (*zap.Logger, *redactor) {
	red := &redactor{}
	red.set.Store(newSecretSet(secrets))
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return &scrubCore{Core: c, red: red}
	})), red
}

// redactor holds the secrets scrubbed from log lines; a reload adds to it.
type redactor struct {
	mu  sync.Mutex // add
	set atomic.Pointer[secretSet]
}

type secretSet struct {
	r       *strings.Replacer
	secrets []string // longest first, so a secret inside another goes with it
}

func newSecretSet(secrets []string) *secretSet {
	secrets = slices.Clone(secrets)
	sort.SliceStable(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, config.Redacted)
	}
	return &secretSet{r: strings.NewReplacer(pairs...), secrets: secrets}
}

// add makes secrets redacted too (the old ones stay: upstreams being
// retired may still print them).
func (r *redactor) add(secrets []string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.set.Load().secrets
	all := slices.Clone(cur)
	for _, s := range secrets {
		if !slices.Contains(all, s) {
			all = append(all, s)
		}
	}
	if len(all) != len(cur) {
		r.set.Store(newSecretSet(all))
	}
}

type scrubCore struct {
	zapcore.Core
	red *redactor
}

func (c *scrubCore) With(fs []zapcore.Field) zapcore.Core {
	return &scrubCore{Core: c.Core.With(c.fields(fs)), red: c.red}
}

func (c *scrubCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *scrubCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	if len(c.red.set.Load().secrets) == 0 {
		return c.Core.Write(e, fs)
	}
	e.Message = c.scrub(e.Message)
	return c.Core.Write(e, c.fields(fs))
}

func (c *scrubCore) has(s string) bool {
	for _, sec := range c.red.set.Load().secrets {
		if strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

func (c *scrubCore) scrub(s string) string {
	if !c.has(s) {
		return s
	}
	return c.red.set.Load().r.Replace(s)
}

// fields returns fs with every field that would print a secret replaced by
// a string field with the secret redacted. fs is copied only when needed.
func (c *scrubCore) fields(fs []zapcore.Field) []zapcore.Field {
	if len(c.red.set.Load().secrets) == 0 {
		return fs
	}
	out := fs
	for i, f := range fs {
		text, ok := c.text(f)
		if !ok || !c.has(text) {
			continue
		}
		if &out[0] == &fs[0] {
			out = append([]zapcore.Field(nil), fs...)
		}
		out[i] = zap.String(f.Key, c.red.set.Load().r.Replace(text))
	}
	return out
}

// text renders what a field would print, for the types that can hold text.
func (c *scrubCore) text(f zapcore.Field) (s string, ok bool) {
	defer func() {
		if recover() != nil { // a Stringer or marshaler that panics: zap reports it itself
			s, ok = "", false
		}
	}()
	switch f.Type {
	case zapcore.StringType:
		return f.String, true
	case zapcore.ByteStringType, zapcore.BinaryType:
		b, _ := f.Interface.([]byte)
		return string(b), true
	case zapcore.ErrorType:
		if err, _ := f.Interface.(error); err != nil {
			return fmt.Sprintf("%+v", err), true
		}
	case zapcore.StringerType:
		if st, _ := f.Interface.(fmt.Stringer); st != nil {
			return st.String(), true
		}
	case zapcore.ArrayMarshalerType, zapcore.ObjectMarshalerType, zapcore.InlineMarshalerType, zapcore.ReflectType:
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		var b strings.Builder
		je := json.NewEncoder(&b)
		je.SetEscapeHTML(false)
		if je.Encode(enc.Fields) != nil {
			return fmt.Sprint(enc.Fields), true
		}
		return b.String(), true
	}
	return "", false
}
