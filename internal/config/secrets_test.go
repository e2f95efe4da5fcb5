package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

const secretsYAML = `
upstreams:
  gh:
    url: https://api.example.com/mcp
    headers: {Authorization: "Bearer ${GH_TOKEN}", X-Short: abc}
  idp:
    url: https://idp-backed.example.com/mcp
    oauth:
      token_url: https://idp.example.com/token
      client_id: mcpgw
      client_secret: ${CLIENT_SECRET}
  fs:
    command: [server]
    env: {API_TOKEN: "${FS_TOKEN}", LEVEL: info}
  pu:
    url: https://per-user.example.com/mcp
    auth: {per_user: {client_id: mcpgw, client_secret: "${PERUSER_SECRET}", issuer: https://as.example.com, store: {file: /tmp/t.json}}}
sessions: {key_file: /run/secrets/keys}
public_url: https://mcp.example.com
auth:
  introspection:
    url: https://idp.example.com/introspect
    client_id: mcpgw
    client_secret: ${INTRO_SECRET}
  api_keys:
    - {name: ci, key: "${CI_KEY}"}
`

var secretEnv = map[string]string{
	"GH_TOKEN":       "gh-token-0123456789",
	"CLIENT_SECRET":  "client-secret-0123456789",
	"FS_TOKEN":       "fs-token-0123456789",
	"CI_KEY":         "ci-key-0123456789abcdef",
	"INTRO_SECRET":   "intro-secret-0123456789",
	"PERUSER_SECRET": "peruser-secret-0123456789",
}

func parseSecrets(t *testing.T) *Config {
	t.Helper()
	cfg, err := Parse("secrets.yaml", []byte(secretsYAML), func(k string) (string, bool) { v, ok := secretEnv[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestSecrets(t *testing.T) {
	got := parseSecrets(t).Secrets()
	want := []string{"Bearer gh-token-0123456789", "client-secret-0123456789", "ci-key-0123456789abcdef", "fs-token-0123456789", "gh-token-0123456789", "intro-secret-0123456789", "peruser-secret-0123456789"}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("Secrets() = %q, missing %q", got, w)
		}
	}
	for _, short := range []string{"abc", "info"} {
		if slices.Contains(got, short) {
			t.Errorf("Secrets() lists %q, shorter than MinSecretLen", short)
		}
	}
	for i := 1; i < len(got); i++ {
		if len(got[i]) > len(got[i-1]) {
			t.Errorf("Secrets() not longest first: %q", got)
		}
	}
}

// Logging config values with zap, in any encoding, never shows a secret.
func TestConfigTypesLogRedacted(t *testing.T) {
	cfg := parseSecrets(t)
	var buf bytes.Buffer
	for _, enc := range []zapcore.Encoder{
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
	} {
		log := zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel))
		for name, u := range cfg.Upstreams {
			log.Debug("upstream", zap.String("name", name), zap.Any("config", u), zap.Object("object", u))
		}
		log.Debug("oauth", zap.Any("oauth", cfg.Upstreams["idp"].OAuth), zap.Any("introspection", cfg.Auth.Introspection), zap.Object("intro", cfg.Auth.Introspection))
		log.Debug("keys", zap.Any("key", cfg.Auth.APIKeys[0]), zap.Any("keys", cfg.Auth.APIKeys), zap.Any("upstreams", cfg.Upstreams), zap.Any("auth", cfg.Auth))
	}
	fmt.Fprintf(&buf, "%v %s %v %+v\n", cfg.Auth.APIKeys[0], cfg.Auth.APIKeys[0], cfg.Upstreams, *cfg.Upstreams["gh"])
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.DebugLevel))
	log.Debug("per_user", zap.Any("pu", cfg.Upstreams["pu"].Auth.PerUser), zap.Object("obj", cfg.Upstreams["pu"].Auth.PerUser))
	fmt.Fprintf(&buf, "%v %+v %s\n", *cfg.Upstreams["pu"], *cfg.Upstreams["pu"].Auth.PerUser, *cfg.Upstreams["pu"].Auth.PerUser)
	if b, err := json.Marshal(cfg); err != nil {
		t.Error(err)
	} else {
		buf.Write(b)
	}
	out := buf.String()
	for k, v := range secretEnv {
		if strings.Contains(out, v) {
			t.Errorf("the value of %s appears in the log:\n%s", k, out)
		}
	}
	for _, want := range []string{Redacted, "Authorization", "API_TOKEN", "https://api.example.com/mcp"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
