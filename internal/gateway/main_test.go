package gateway_test

import (
	"testing"

	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

func TestMain(m *testing.M) { gatewaytest.Main(m) }
