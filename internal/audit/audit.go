// Package audit writes mcpgw's audit log: one structured record per tool
// call, prompt get and resource read, and one per refused request (access
// policy, definition pinning, rate limits), on a zap logger of its own so
// that the records can be shipped apart from the operational log.
//
// A record says who (the principal: subject, issuer, client, API key,
// groups, scopes), where (route, upstream, and the kind of credential the
// upstream call carried for that principal — never the credential), what (method, kind, name), the
// decision and what made it (rule, reason), how long it took, how it ended
// (Outcome) and a SHA-256 hash of the call's arguments exactly as the client
// sent them ("sha256:<hex>" over the raw bytes of params.arguments, so equal
// hashes mean byte-identical arguments). The arguments themselves are
// recorded only when configured, and then with every value of a configured
// field name (case-insensitive, at any depth) replaced by "[redacted]";
// arguments that cannot be parsed for redaction are left out, never written
// unredacted.
//
// The router fills a Record and calls Logger.Log; a nil *Logger does
// nothing, so the router needs no checks. The package holds no mutable
// state of its own.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/policy"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// Outcome is how an audited request ended.
type Outcome string

// Outcomes.
const (
	// OK: the upstream answered with a result.
	OK Outcome = "ok"
	// ToolError: a tools/call result with isError: true.
	ToolError Outcome = "tool_error"
	// ProtocolError: a JSON-RPC error, from the upstream or the gateway.
	ProtocolError Outcome = "protocol_error"
	// Timeout: no answer in time (the call was cancelled upstream).
	Timeout Outcome = "timeout"
	// Cancelled: the caller gave up (notifications/cancelled, disconnect).
	Cancelled Outcome = "cancelled"
	// InputRequired: a 2026-07-28 input_required result; the client's
	// retry with the answers is a record of its own.
	InputRequired Outcome = "input_required"
	// Denied: refused by the access policy or definition pinning; nothing
	// reached the upstream.
	Denied Outcome = "denied"
	// RateLimited: refused by a rate limit or concurrency cap; nothing
	// reached the upstream.
	RateLimited Outcome = "rate_limited"
)

// Decisions.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Rule names for refusals that no policy rule made.
const (
	RulePinning    = "policy.pinning"
	RuleRateLimits = "policy.rate_limits"
	RuleDefault    = "policy.default"
	// RuleInterceptor prefixes an interceptor's name ("interceptors.NAME").
	RuleInterceptor = "interceptors."
)

// Record is one audit record.
type Record struct {
	// Time is when the request arrived.
	Time      time.Time
	Principal policy.Principal
	Route     string
	// Upstream owns the name ("" when no upstream does).
	Upstream string
	// Credential is the kind of credential the upstream call carried
	// (credentials.Kind: none, static, client_credentials, exchanged,
	// per_user), acting for Principal; never the credential itself. Empty
	// when nothing reached an upstream.
	Credential string
	// ForwardedHeaders names the caller headers the route forwards by
	// opt-in (upstreams.NAME.forward_headers) that the request carried;
	// never their values.
	ForwardedHeaders []string
	// Intercepted notes what interceptors did ("NAME: modify"), in order.
	Intercepted []string
	Method      string
	// Kind is tool, prompt or resource; Name the tool or prompt name or the
	// resource URI, as the client sent it.
	Kind, Name string
	// CuratedName is the name the client called a curated tool by, when
	// the route renames it (Name stays the canonical upstream name).
	CuratedName string
	// Decision is Allow or Deny; Rule names what decided
	// ("policy.rules[2]", RuleDefault, RulePinning, RuleRateLimits), Pattern
	// the rule's matching pattern, Reason the explanation in words.
	Decision, Rule, Pattern, Reason string
	Duration                        time.Duration
	Outcome                         Outcome
	// ErrorCode and Error are the JSON-RPC error of the response, if any.
	ErrorCode int
	Error     string
	// Arguments are params.arguments as the client sent them (nil: none),
	// with a curated tool's fixed values and defaults set: what ran.
	Arguments json.RawMessage
	// RequestID is the HTTP request's id (X-Request-Id), the request_id of
	// the process log's lines about the same request; TraceID is its trace,
	// when tracing is on. Either joins a record to the rest of its story.
	RequestID, TraceID string
}

// Rule names a policy decision's deciding rule.
func Rule(d policy.Decision) string {
	if d.Rule >= 0 {
		return fmt.Sprintf("policy.rules[%d]", d.Rule)
	}
	return RuleDefault
}

// SetResponse records how resp ended the request: its outcome and its
// error, if any. A gateway timeout is Timeout; cancelled reports whether
// the caller had given up.
func (r *Record) SetResponse(resp *jsonrpc.Message, cancelled bool) {
	switch {
	case resp == nil:
		r.Outcome = ProtocolError
	case resp.Error != nil:
		r.ErrorCode, r.Error = resp.Error.Code, resp.Error.Message
		switch {
		case resp.Error.Code == mcp.CodeRequestTimeout && cancelled:
			r.Outcome = Cancelled
		case resp.Error.Code == mcp.CodeRequestTimeout:
			r.Outcome = Timeout
		default:
			r.Outcome = ProtocolError
		}
	default:
		r.Outcome = OK
		if b, ok := rawjson.Get(resp.Result, "isError"); ok && bytes.Equal(b, []byte("true")) {
			r.Outcome = ToolError
		} else if t, _ := rawjson.GetString(resp.Result, "resultType"); t == "input_required" {
			r.Outcome = InputRequired
		}
	}
}

// Options configure a Logger.
type Options struct {
	// IncludeArguments records the (redacted) arguments, not only their hash.
	IncludeArguments bool
	// RedactFields are the field names whose values are redacted.
	RedactFields []string
}

// Logger writes audit records. A nil *Logger does nothing.
type Logger struct {
	log     *zap.Logger
	include bool
	redact  map[string]bool // lower-cased field names
	closer  io.Closer       // the file Open opened, if any
}

// New returns a Logger writing each record as one Info entry on log, whose
// entry time is the record's Time.
func New(log *zap.Logger, opts Options) *Logger {
	l := &Logger{log: log, include: opts.IncludeArguments, redact: map[string]bool{}}
	for _, f := range opts.RedactFields {
		l.redact[strings.ToLower(f)] = true
	}
	return l
}

// Open builds the Logger of an audit: section: JSON lines (time in RFC 3339
// UTC with nanoseconds, no level) on stdout, stderr or a file opened for
// appending (created 0600). A nil section gives a nil Logger (audit off).
func Open(cfg *config.Audit) (*Logger, error) {
	if cfg == nil {
		return nil, nil
	}
	var ws zapcore.WriteSyncer
	var closer io.Closer
	switch cfg.Output {
	case config.AuditStdout, "":
		ws = zapcore.Lock(os.Stdout)
	case config.AuditStderr:
		ws = zapcore.Lock(os.Stderr)
	default:
		f, err := os.OpenFile(cfg.Output, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit.output: %w (create its directory, or give a writable path)", err)
		}
		ws, closer = zapcore.Lock(f), f
	}
	l := New(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(EncoderConfig()), ws, zapcore.InfoLevel)),
		Options{IncludeArguments: cfg.IncludeArguments, RedactFields: cfg.RedactFields})
	l.closer = closer
	return l, nil
}

// EncoderConfig is the JSON encoding of the records Open writes.
func EncoderConfig() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		TimeKey:    "time",
		MessageKey: "msg",
		EncodeTime: func(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
			enc.AppendString(t.UTC().Format(time.RFC3339Nano))
		},
		EncodeDuration: zapcore.StringDurationEncoder,
		LineEnding:     zapcore.DefaultLineEnding,
	}
}

// Close flushes the records and closes the file Open opened.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	err := l.log.Sync()
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = nil // stdout and stderr cannot always be synced (pipes, terminals)
	}
	if l.closer != nil {
		if cerr := l.closer.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Log writes one record.
func (l *Logger) Log(r *Record) {
	if l == nil || r == nil || !l.log.Core().Enabled(zapcore.InfoLevel) {
		return
	}
	fields := make([]zap.Field, 0, 20)
	add := func(key, v string) {
		if v != "" {
			fields = append(fields, zap.String(key, v))
		}
	}
	add("request_id", r.RequestID)
	add("trace_id", r.TraceID)
	add("method", r.Method)
	add("route", r.Route)
	add("upstream", r.Upstream)
	add("credential", r.Credential)
	if len(r.Intercepted) > 0 {
		fields = append(fields, zap.Strings("intercepted", r.Intercepted))
	}
	if len(r.ForwardedHeaders) > 0 {
		fields = append(fields, zap.Strings("forwarded_headers", r.ForwardedHeaders))
	}
	add("kind", r.Kind)
	add("name", r.Name)
	add("curated_name", r.CuratedName)
	fields = append(fields, zap.Object("principal", principal{&r.Principal}))
	add("decision", r.Decision)
	add("rule", r.Rule)
	add("pattern", r.Pattern)
	add("reason", r.Reason)
	fields = append(fields, zap.Float64("duration_ms", float64(r.Duration.Microseconds())/1000))
	add("outcome", string(r.Outcome))
	if r.ErrorCode != 0 || r.Error != "" {
		fields = append(fields, zap.Int("error_code", r.ErrorCode), zap.String("error", r.Error))
	}
	if r.Arguments != nil {
		add("arguments_hash", Hash(r.Arguments))
		if l.include {
			if red, err := Redact(r.Arguments, l.redact); err == nil {
				fields = append(fields, zap.Any("arguments", json.RawMessage(red)))
			} else {
				// Never write what could not be redacted.
				fields = append(fields, zap.String("arguments_error", "not recorded: "+err.Error()))
			}
		}
	}
	_ = l.log.Core().Write(zapcore.Entry{Level: zapcore.InfoLevel, Time: r.Time, Message: "audit"}, fields)
}

// Hash is "sha256:<hex>" of raw.
func Hash(raw []byte) string {
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// principal encodes a principal, leaving out what is empty.
type principal struct{ *policy.Principal }

func (p principal) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	str := func(k, v string) {
		if v != "" {
			enc.AddString(k, v)
		}
	}
	list := func(k string, v []string) {
		if len(v) > 0 {
			_ = enc.AddArray(k, zapcore.ArrayMarshalerFunc(func(ae zapcore.ArrayEncoder) error {
				for _, s := range v {
					ae.AppendString(s)
				}
				return nil
			}))
		}
	}
	if p.Subject == "" && p.APIKey == "" {
		enc.AddBool("anonymous", true)
	}
	str("subject", p.Subject)
	str("issuer", p.Issuer)
	str("client_id", p.ClientID)
	str("api_key", p.APIKey)
	list("groups", p.Groups)
	list("scopes", p.Scopes)
	return nil
}

// maxDepth bounds the nesting Redact follows.
const maxDepth = 256

// Redacted replaces the value of a redacted field.
const Redacted = `"[redacted]"`

// Redact returns raw, compacted, with the value of every object member
// whose lower-cased name is in fields replaced by "[redacted]", at any
// depth. Member order and number texts are kept.
func Redact(raw []byte, fields map[string]bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := redactValue(dec, &buf, fields, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return buf.Bytes(), nil
}

func redactValue(dec *json.Decoder, buf *bytes.Buffer, fields map[string]bool, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := t.(type) {
	case json.Delim:
		open, end := byte(t), byte('}')
		if t == '[' {
			end = ']'
		} else if t != '{' {
			return fmt.Errorf("unexpected %v", t)
		}
		buf.WriteByte(open)
		for i := 0; dec.More(); i++ {
			if i > 0 {
				buf.WriteByte(',')
			}
			if open == '[' {
				if err := redactValue(dec, buf, fields, depth+1); err != nil {
					return err
				}
				continue
			}
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string) // object keys are strings
			writeString(buf, k)
			buf.WriteByte(':')
			if fields[strings.ToLower(k)] {
				if err := redactValue(dec, &bytes.Buffer{}, nil, depth+1); err != nil {
					return err
				}
				buf.WriteString(Redacted)
				continue
			}
			if err := redactValue(dec, buf, fields, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		buf.WriteByte(end)
	case string:
		writeString(buf, t)
	case json.Number:
		buf.WriteString(t.String())
	case bool:
		fmt.Fprint(buf, t)
	case nil:
		buf.WriteString("null")
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}
