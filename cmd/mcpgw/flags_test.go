package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHelpOnEverySubcommand: -h and --help print the usage on stdout and
// exit 0; a bad flag prints on stderr and exits 2.
func TestHelpOnEverySubcommand(t *testing.T) {
	for _, cmd := range [][]string{
		{"run"}, {"validate"}, {"stdio"}, {"policy", "explain"}, {"catalog"},
		{"pin"}, {"demo-server"}, {"healthcheck"},
	} {
		for _, help := range []string{"-h", "--help"} {
			t.Run(strings.Join(cmd, " ")+" "+help, func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				if code := run(append(cmd, help), &stdout, &stderr); code != 0 {
					t.Errorf("exit %d, want 0", code)
				}
				if !strings.HasPrefix(stdout.String(), "Usage:") || stderr.Len() != 0 {
					t.Errorf("stdout %q, stderr %q: want the usage on stdout only", stdout.String(), stderr.String())
				}
				if strings.Contains(stdout.String(), "\n  -config") {
					t.Errorf("usage spells flags -config, want --config:\n%s", stdout.String())
				}
			})
		}
		t.Run(strings.Join(cmd, " ")+" bad flag", func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append(cmd, "--no-such-flag"), &stdout, &stderr); code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr.String(), "no-such-flag") || stdout.Len() != 0 {
				t.Errorf("stdout %q, stderr %q: want the error on stderr", stdout.String(), stderr.String())
			}
		})
	}
}

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		fmt.Fprintln(w, `{"ready":false,"reason":"draining"}`)
	}))
	defer srv.Close()
	tests := []struct {
		name   string
		status int
		url    string
		want   int
	}{
		{"ready", http.StatusOK, srv.URL + "/readyz", 0},
		{"not ready", http.StatusServiceUnavailable, srv.URL + "/readyz", 1},
		{"nothing listening", http.StatusOK, "http://127.0.0.1:1/readyz", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status = tt.status
			var stdout, stderr bytes.Buffer
			if code := run([]string{"healthcheck", "--url", tt.url}, &stdout, &stderr); code != tt.want {
				t.Errorf("exit %d, want %d (stdout %q, stderr %q)", code, tt.want, stdout.String(), stderr.String())
			}
			if tt.want == 1 && stderr.Len() == 0 {
				t.Error("a failed check says nothing on stderr")
			}
		})
	}
}
