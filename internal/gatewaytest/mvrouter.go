package gatewaytest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The helpers shared by the per-user, credential and browser tests of
// internal/router, internal/router/edge, internal/credentials and the tests
// still in internal/gateway.

// The test OP's clients, as the per-user and token-exchange tests
// register them.
const (
	IdPAppClient   = "mcp-app" // the public client users sign in to the gateway with
	IdPAppRedirect = "http://127.0.0.1/callback"
	IdPGWClient    = "mcpgw" // the gateway's confidential client at the OP
)

// InitBody is an initialize request of revision 2025-11-25 with no
// capabilities.
const InitBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// Clock is a clock the test moves (a gateway's Options.Now).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a Clock that reads now until moved.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Whoami calls tool on cs and returns its text; a tool error is an error
// carrying its text.
func Whoami(t *testing.T, cs *mcp.ClientSession, tool string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	if res.IsError {
		var parts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		return "", fmt.Errorf("tool error: %s", strings.Join(parts, ""))
	}
	return TextOf(t, res), nil
}

// chromiumFlags run a headless Chromium that touches nothing outside its
// fresh profile and reaches only the page it is given.
func chromiumFlags() []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars",
	}
}

// Chromium finds the browser, skipping the test when it is not installed
// unless MCPGW_REQUIRE_CHROMIUM is set (.ci/run sets it and installs the
// Debian package chromium).
func Chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("MCPGW_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed and MCPGW_REQUIRE_CHROMIUM is set: apt-get install chromium")
	}
	t.Skip("chromium is not installed (apt-get install chromium; set MCPGW_REQUIRE_CHROMIUM=1 to require it)")
	return ""
}

// RunChromium runs the headless browser bin with args on a fresh profile
// and returns what it printed.
func RunChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir() // a fresh profile every run
	cmd := exec.CommandContext(ctx, bin, append(append(append([]string{}, chromiumFlags()...), "--user-data-dir="+profile), args...)...)
	cmd.Env = append(os.Environ(), "HOME="+profile) // nothing written to the real home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}
