package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

// The fleet example (deploy/fleet): its config loads with what run.sh
// sets, as a fleet (Redis and a key ring); its HAProxy config balances
// round robin without stickiness over three replicas, and HAProxy itself
// accepts it when installed (test/fleet runs it for real).
func TestFleetExample(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "session-keys")
	if err := os.WriteFile(keys, []byte("q5x2Wb7y0U5o2cI4JXh8nGc1rL6vP9sT3aE0dK4mN2w=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"MCPGW_LISTEN": "127.0.0.1:8081", "MCPGW_ADMIN": "127.0.0.1:9091",
		"MCPGW_EXECUTABLE": "/usr/local/bin/mcpgw", "MCPGW_SESSION_KEYS": keys,
	}
	cfg, err := config.Load("fleet/mcpgw.yaml", func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sessions == nil || cfg.Sessions.Redis == nil || cfg.Sessions.Redis.Addr != "127.0.0.1:6379" || cfg.Sessions.KeyFile != keys {
		t.Errorf("fleet/mcpgw.yaml is not a fleet's config: sessions %+v", cfg.Sessions)
	}

	b, err := os.ReadFile("fleet/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	// The directives, without comments.
	hc := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(string(b), "")
	servers := regexp.MustCompile(`(?m)^\s+server r\d `).FindAllString(hc, -1)
	if !strings.Contains(hc, "balance roundrobin") || len(servers) != 3 {
		t.Errorf("haproxy.cfg: want balance roundrobin over 3 servers, got %d servers", len(servers))
	}
	for _, sticky := range []string{"cookie", "stick", "balance source", "prefer-last-server"} {
		if strings.Contains(hc, " "+sticky) {
			t.Errorf("haproxy.cfg uses %q: the fleet needs no stickiness", sticky)
		}
	}
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Log("haproxy not installed: its own check skipped")
		return
	}
	cmd := exec.Command(bin, "-c", "-f", "fleet/haproxy.cfg")
	cmd.Env = append(os.Environ(), "MCPGW_LB=127.0.0.1:8080")
	for i := 1; i <= 3; i++ {
		cmd.Env = append(cmd.Env, fmt.Sprintf("MCPGW_R%d=127.0.0.1:808%d", i, i), fmt.Sprintf("MCPGW_R%d_ADMIN_PORT=909%d", i, i))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("haproxy -c -f fleet/haproxy.cfg: %v\n%s", err, out)
	}
}
