package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// The process log: auto is JSON off a terminal (a pipe, a file, a buffer);
// every line names its caller. An error an operator can act on (a port in
// use, a failed reload, an upstream crash-looping) is one line without a
// Go stack trace; only a programming error (DPanic) carries one.
func TestLoggerFormats(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Fatal("a pipe or a buffer taken for a terminal")
	}
	for _, tc := range []struct {
		format string
		json   bool
	}{{"auto", true}, {"json", true}, {"console", false}} {
		var buf bytes.Buffer
		log, err := newLogger(tc.format, "info", &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello", zap.String("k", "v"))
		log.Error("broke", zap.String("k", "v"))
		log.DPanic("bug", zap.String("k", "v"))
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if !tc.json {
			if json.Valid([]byte(lines[0])) || !strings.Contains(lines[0], "logger_test.go:") {
				t.Errorf("%s: first line %q, want console text naming its caller", tc.format, lines[0])
			}
			errLine, bug, _ := strings.Cut(buf.String(), "bug")
			if strings.Contains(errLine, "TestLoggerFormats") {
				t.Errorf("%s: the error carries a stack trace:\n%s", tc.format, buf.String())
			}
			if !strings.Contains(bug, "TestLoggerFormats") {
				t.Errorf("%s: the DPanic has no stack trace:\n%s", tc.format, buf.String())
			}
			continue
		}
		if len(lines) != 3 {
			t.Fatalf("%s: %d lines: %s", tc.format, len(lines), buf.String())
		}
		var info, errl, bug map[string]any
		if json.Unmarshal([]byte(lines[0]), &info) != nil || json.Unmarshal([]byte(lines[1]), &errl) != nil || json.Unmarshal([]byte(lines[2]), &bug) != nil {
			t.Fatalf("%s: not JSON lines: %s", tc.format, buf.String())
		}
		if c, _ := info["caller"].(string); !strings.HasPrefix(c, "mcpgw/logger_test.go:") {
			t.Errorf("%s: caller %v", tc.format, info["caller"])
		}
		if info["stacktrace"] != nil {
			t.Errorf("%s: an info line has a stack trace", tc.format)
		}
		if errl["stacktrace"] != nil {
			t.Errorf("%s: an error line has a stack trace", tc.format)
		}
		if st, _ := bug["stacktrace"].(string); !strings.Contains(st, "TestLoggerFormats") {
			t.Errorf("%s: DPanic stacktrace %q", tc.format, st)
		}
	}
	if _, err := newLogger("xml", "info", &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "use auto, json or console") {
		t.Errorf("bad format: %v", err)
	}
}
