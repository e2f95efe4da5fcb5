package client_test

import (
	"os"
	"testing"

	"github.com/mcpgw/mcpgw/internal/sandbox"
)

// The test binary is also the sandbox launcher for sandboxed children
// (sandbox_npm_test.go), and a hostile stdio upstream
// (MCPGW_CLIENT_TEST_CHILD, serverrequests_test.go): it answers
// initialize, then floods the gateway with requests and never reads
// another byte.
func TestMain(m *testing.M) {
	sandbox.LauncherMain()
	if mode := os.Getenv("MCPGW_CLIENT_TEST_CHILD"); mode != "" {
		floodChild(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
