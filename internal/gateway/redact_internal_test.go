package gateway

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type stringer string

func (s stringer) String() string { return string(s) }

type sink struct{ strings.Builder }

func (s *sink) Sync() error { return nil }

// Every kind of field that can carry text is scrubbed, in messages, With
// fields and line fields; other lines pass untouched.
func TestRedactSecretsFields(t *testing.T) {
	t.Parallel()
	var out sink
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	base := zap.New(zapcore.NewCore(enc, &out, zapcore.DebugLevel))
	secret, inner := "Bearer tok-1234567890", "tok-1234567890"
	log := redactSecrets(base, []string{secret, inner}).With(zap.String("with", "x "+inner))
	log.Info("message "+secret,
		zap.String("s", inner),
		zap.ByteString("b", []byte(inner)),
		zap.Error(fmt.Errorf("wrapped: %w", errors.New(inner))),
		zap.Stringer("st", stringer(inner)),
		zap.Strings("argv", []string{"run", "--token=" + inner}),
		zap.Any("m", map[string]string{"Authorization": secret}),
		zap.Int("n", 7),
	)
	log.Debug("plain", zap.String("s", "nothing secret"))
	got := out.String()
	if strings.Contains(got, inner) {
		t.Errorf("secret in log:\n%s", got)
	}
	for _, want := range []string{`"msg":"message [redacted]"`, `"with":"x [redacted]"`, `"s":"[redacted]"`, `"n":7`, `"s":"nothing secret"`, `--token=[redacted]`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	if redactSecrets(base, nil) != base {
		t.Error("no secrets should leave the logger as it is")
	}
}
