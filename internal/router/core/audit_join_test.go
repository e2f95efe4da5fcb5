package core_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/gateway"
	"github.com/mcpgw/mcpgw/internal/gatewaytest"
)

// An audit record carries the request's X-Request-Id, the request_id of
// the process log's lines about the same request, so the two join.
func TestAuditRecordJoinsProcessLog(t *testing.T) {
	alpha := gatewaytest.HTTPUpstream(t, "alpha", 0)
	path := filepath.Join(t.TempDir(), "audit.log")
	cfg, err := config.Parse("test.yaml", []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
upstreams: {alpha: {url: %s}}
policy:
  default: allow
  rules:
    - deny: [alpha__slow]
audit: {output: %s}
`, alpha, path)), nil)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.Start(cfg, gateway.Options{Logger: zap.New(core), Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	c := &gatewaytest.RawClient{T: t, URL: "http://" + ln.Addr().String() + "/mcp"}
	c.Initialize("2025-11-25")
	for _, tc := range []struct{ id, tool string }{{"join-ok-1", "alpha__echo"}, {"join-denied-2", "alpha__slow"}} {
		c.Do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tc.tool+`","arguments":{}}}`,
			func(r *http.Request) { r.Header.Set("X-Request-Id", tc.id) }).Last(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gw.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	recs := gatewaytest.AuditRecords(t, path)
	if len(recs) != 2 || recs[0]["request_id"] != "join-ok-1" || recs[1]["request_id"] != "join-denied-2" {
		t.Fatalf("audit records: %v", recs)
	}
	// The denial's process log line has the same request_id.
	found := false
	for _, e := range logs.FilterMessage("request denied by policy").All() {
		if e.ContextMap()["request_id"] == "join-denied-2" {
			found = true
		}
	}
	if !found {
		t.Errorf("no process log line with request_id join-denied-2; lines: %v", logs.All())
	}
	if _, ok := recs[0]["trace_id"]; ok {
		t.Errorf("a trace_id with tracing off: %v", recs[0])
	}
}
