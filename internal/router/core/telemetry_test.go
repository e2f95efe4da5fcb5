package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/telemetry"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// Every round of a bridged call is an event on its server span, whichever
// path asks: the upstream's request (gather), a retry that left the input
// unanswered (asked again at once by Next), and each retry that resumes it.
func TestBridgedRoundsAreSpanEvents(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	f := newFixture(t, false, func(o *Options) { o.Tracer = tp.Tracer("test") })
	alice := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	call := f.core.StartBridged(f.stateless(t, `{"sampling":{}}`, alice), request(mcp.MethodToolsCall, `{"name":"up__sample","arguments":{"text":"2+2?"}}`), nil, nil)
	out := call.Next(nil, nil, func([]byte) {})
	call.Release()
	var ir struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if out.InputRequired == nil || json.Unmarshal(out.InputRequired, &ir) != nil || len(ir.InputRequests) != 1 {
		t.Fatalf("first round %+v, want input_required", out)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	for _, responses := range []string{
		`{}`, // nothing answered: input_required again
		fmt.Sprintf(`{%q:{"role":"assistant","model":"m","content":{"type":"text","text":"four"}}}`, key),
	} {
		params := fmt.Sprintf(`{"name":"up__sample","arguments":{"text":"2+2?"},"requestState":%q,"inputResponses":%s}`, ir.RequestState, responses)
		c, _, err := f.core.Resume(f.stateless(t, `{"sampling":{}}`, alice), request(mcp.MethodToolsCall, params))
		if err != nil {
			t.Fatal(err)
		}
		out = c.Next(nil, nil, func([]byte) {})
		c.Release()
		if out.InputRequired != nil {
			_ = json.Unmarshal(out.InputRequired, &ir) // the next round's requestState
		}
	}
	if out.Resp == nil || text(t, out.Resp) != "sampled:four" {
		t.Fatalf("last round %+v, want the call's answer", out)
	}
	var server sdktrace.ReadOnlySpan
	// A poll for the span, which ends after the answer, bounded by deadline.
	for deadline := time.Now().Add(testwait.Long); server == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, s := range sr.Ended() {
			if s.Name() == "tools/call up__sample" {
				server = s
			}
		}
	}
	if server == nil {
		t.Fatal("no server span ended for the call")
	}
	var got []string
	for _, e := range server.Events() {
		round := ""
		for _, kv := range e.Attributes {
			if kv.Key == "mcpgw.bridge.round" {
				round = kv.Value.Emit()
			}
		}
		got = append(got, e.Name+"@"+round)
	}
	want := []string{
		telemetry.EventBridgeInputRequired + "@0",
		telemetry.EventBridgeResumed + "@1",
		telemetry.EventBridgeInputRequired + "@1",
		telemetry.EventBridgeResumed + "@2",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("server span events %v, want %v", got, want)
	}
}
