package core

import (
	"encoding/json"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// maxClientField bounds each clientInfo string logged: a client chooses
// them, and one log line must not carry what it likes.
const maxClientField = 128

// ClientField logs a session's clientInfo (from initialize) as a structured
// object — client.name, client.version, client.title — rather than its JSON
// as one string, which log pipelines cannot index. Other members are left
// out; a clientInfo that is not an object logs nothing but the field.
func ClientField(info json.RawMessage) zap.Field {
	var ci struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Title   string `json:"title"`
	}
	_ = json.Unmarshal(info, &ci)
	return zap.Object("client", zapcore.ObjectMarshalerFunc(func(enc zapcore.ObjectEncoder) error {
		for _, kv := range [...][2]string{{"name", ci.Name}, {"version", ci.Version}, {"title", ci.Title}} {
			if kv[1] != "" {
				enc.AddString(kv[0], truncate(kv[1], maxClientField))
			}
		}
		return nil
	}))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
