package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Relative paths in a config file resolve against the file's directory,
// not the working directory; a command found on PATH, and a program path
// under an upstream's own dir:, stay as written.
func TestRelativePathsResolveAgainstConfigDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "etc", "mcpgw.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `upstreams:
  local: {command: [./bin/server, ./arg]}
  onpath: {command: [node, server.js]}
  indir: {command: [./run.sh], dir: work}
  abs: {command: [/usr/bin/server], dir: /srv}
sessions:
  key_file: secrets/keys
admin:
  listen: 127.0.0.1:9091
  token_file: ../token
auth:
  api_keys:
    - {name: ci, key_file: keys/ci}
policy:
  default: allow
  pinning: {mode: warn, lock_file: tools.lock.json}
audit:
  output: log/audit.log
interceptors:
  - {name: guard, type: external, phase: request, url: "http://127.0.0.1:9/hook", bearer_token_file: hook.token}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// From another working directory: the result must not depend on it.
	t.Chdir(t.TempDir())
	c, err := loadAll(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	etc := filepath.Dir(path)
	for _, tc := range []struct{ what, got, want string }{
		{"sessions.key_file", c.Sessions.KeyFile, filepath.Join(etc, "secrets/keys")},
		{"admin.token_file", c.Admin.TokenFile, filepath.Join(dir, "token")},
		{"auth.api_keys[0].key_file", c.Auth.APIKeys[0].KeyFile, filepath.Join(etc, "keys/ci")},
		{"policy.pinning.lock_file", c.Policy.Pinning.LockFile, filepath.Join(etc, "tools.lock.json")},
		{"audit.output", c.Audit.Output, filepath.Join(etc, "log/audit.log")},
		{"interceptors[0].bearer_token_file", c.Interceptors[0].BearerTokenFile, filepath.Join(etc, "hook.token")},
		{"upstreams.indir.dir", c.Upstreams["indir"].Dir, filepath.Join(etc, "work")},
		{"upstreams.abs.dir", c.Upstreams["abs"].Dir, "/srv"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	for name, want := range map[string][]string{
		"local":  {filepath.Join(etc, "bin/server"), "./arg"},
		"onpath": {"node", "server.js"},
		"indir":  {"./run.sh"},
		"abs":    {"/usr/bin/server"},
	} {
		if got := c.Upstreams[name].Command; !reflect.DeepEqual(got, want) {
			t.Errorf("upstreams.%s.command = %q, want %q", name, got, want)
		}
	}
	// Parse has no file to be relative to: a relative audit path stays
	// refused there.
	if _, err := parseAll("x.yaml", []byte(cfg), nil); err == nil {
		t.Error("Parse accepted a relative audit.output")
	}
}
