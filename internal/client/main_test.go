package client_test

import (
	"os"
	"testing"

	"github.com/mcpgw/mcpgw/internal/sandbox"
)

// The test binary is also the sandbox launcher for sandboxed children
// (sandbox_npm_test.go).
func TestMain(m *testing.M) {
	sandbox.LauncherMain()
	os.Exit(m.Run())
}
