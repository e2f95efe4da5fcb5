package client

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
)

func TestChildEnv(t *testing.T) {
	gateway := []string{
		"PATH=/usr/bin", "HOME=/home/gw", "LC_ALL=C.UTF-8", "TZ=UTC",
		"GITHUB_TOKEN=ghp-secret", "AWS_SECRET_ACCESS_KEY=aws-secret",
		"NPM_CONFIG_CACHE=/tmp/npm", "NPM_CONFIG_REGISTRY=https://r.example",
		"NODE_EXTRA_CA_CERTS=/ca.pem", "MALFORMED", "=novalue",
	}
	tests := []struct {
		name    string
		inherit []string
		env     map[string]string
		want    []string
	}{
		{"minimal", nil, nil, []string{"HOME=/home/gw", "LC_ALL=C.UTF-8", "PATH=/usr/bin", "TZ=UTC"}},
		{"own env on top, and winning", nil, map[string]string{"LOG_LEVEL": "info", "HOME": "/srv"},
			[]string{"HOME=/srv", "LC_ALL=C.UTF-8", "LOG_LEVEL=info", "PATH=/usr/bin", "TZ=UTC"}},
		{"names and a prefix", []string{"NODE_EXTRA_CA_CERTS", "NPM_CONFIG_*"}, nil,
			[]string{"HOME=/home/gw", "LC_ALL=C.UTF-8", "NODE_EXTRA_CA_CERTS=/ca.pem", "NPM_CONFIG_CACHE=/tmp/npm", "NPM_CONFIG_REGISTRY=https://r.example", "PATH=/usr/bin", "TZ=UTC"}},
		{"a name is exact", []string{"GITHUB"}, nil, []string{"HOME=/home/gw", "LC_ALL=C.UTF-8", "PATH=/usr/bin", "TZ=UTC"}},
		{"everything", []string{"*"}, nil, []string{"AWS_SECRET_ACCESS_KEY=aws-secret", "GITHUB_TOKEN=ghp-secret", "HOME=/home/gw", "LC_ALL=C.UTF-8",
			"NODE_EXTRA_CA_CERTS=/ca.pem", "NPM_CONFIG_CACHE=/tmp/npm", "NPM_CONFIG_REGISTRY=https://r.example", "PATH=/usr/bin", "TZ=UTC"}},
	}
	if got := ChildEnv(nil, nil, nil); got == nil {
		t.Error("ChildEnv of nothing is nil, which exec.Cmd reads as the gateway's whole environment")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChildEnv(gateway, tc.inherit, tc.env); !slices.Equal(got, tc.want) {
				t.Errorf("ChildEnv =\n %q\nwant\n %q", got, tc.want)
			}
		})
	}
}

// A child that prints its whole environment sees the minimal set and its
// own env:, never a variable of the gateway's meant for another upstream.
func TestStdioChildEnvironment(t *testing.T) {
	const token = "ghp-gateway-secret-5e1d"
	t.Setenv("GITHUB_TOKEN", token) // the gateway's, for an HTTP upstream's header
	t.Setenv("EXTRA_ONE", "1")
	t.Setenv("HOME", "/home/gw")
	printed := make(chan string, 1)
	s := NewStdio(StdioConfig{
		// It prints its environment as one stderr line (kept in the
		// transport's tail), then exits.
		Argv:       []string{"sh", "-c", `env | tr '\n' ' ' >&2; echo >&2`},
		Env:        map[string]string{"OWN": "mine"},
		InheritEnv: []string{"EXTRA_*"},
		Stderr:     NewStderrLog(StderrOptions{}),
	})
	if err := s.Start(context.Background(), func([]byte, jsonrpc.ID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go func() {
		<-s.Done()
		printed <- s.tail.text(false)
	}()
	var out string
	select {
	case out = <-printed:
	case <-time.After(10 * time.Second): // the failure's deadline, not a wait
		t.Fatal("the child did not exit")
	}
	for _, want := range []string{"OWN=mine", "EXTRA_ONE=1", "HOME=/home/gw", "PATH="} {
		if !strings.Contains(out, want) {
			t.Errorf("child environment %q lacks %s", out, want)
		}
	}
	if strings.Contains(out, token) || strings.Contains(out, "GITHUB_TOKEN") {
		t.Errorf("the child got the gateway's GITHUB_TOKEN: %q", out)
	}
}
