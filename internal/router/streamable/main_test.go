package streamable_test

import (
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// The tests here that run a whole gateway start stdio upstreams as children
// of this test binary: gatewaytest.Main serves them.
func TestMain(m *testing.M) { gatewaytest.Main(m) }
