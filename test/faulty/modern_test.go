package faulty

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func TestComplete(t *testing.T) {
	tests := []struct {
		name, in string
		modern   bool
		want     string
	}{
		{"empty object", `{}`, true, `{"resultType":"complete"}`},
		{"members kept", `{"a":1}`, true, `{"resultType":"complete","a":1}`},
		{"already said", `{"resultType":"input_required"}`, true, `{"resultType":"input_required"}`},
		{"legacy request", `{"a":1}`, false, `{"a":1}`},
	}
	for _, tt := range tests {
		got := complete(jsonrpc.NewResult(jsonrpc.IntID(1), json.RawMessage(tt.in)), tt.modern)
		if string(got.Result) != tt.want || !json.Valid(got.Result) {
			t.Errorf("%s: %s, want %s", tt.name, got.Result, tt.want)
		}
	}
	e := jsonrpc.NewError(jsonrpc.IntID(1), jsonrpc.Errorf(1, "x"))
	if got := complete(e, true); got.Result != nil {
		t.Errorf("an error got a result: %s", got.Result)
	}
}

// With Modern, the stdio server speaks 2026-07-28: discover, resultType,
// and list changes only on the subscriptions/listen stream, tagged.
func TestModernStdio(t *testing.T) {
	p, _ := startStdio(t, Options{Modern: true})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta2026 + `}}`)
	if _, r := p.until("1", 5*time.Second); !bytes.Contains(r.Result, []byte(`"2026-07-28"`)) || !bytes.Contains(r.Result, []byte(`"resultType":"complete"`)) {
		t.Errorf("discover: %s", r.Result)
	}
	p.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta2026 + `}}`)
	select {
	case line := <-p.lines:
		if !bytes.Contains(line, []byte(`"notifications/subscriptions/acknowledged"`)) || !bytes.Contains(line, []byte(`"io.modelcontextprotocol/subscriptionId":"L"`)) {
			t.Errorf("acknowledgement: %s", line)
		}
	case <-time.After(testwait.Long): // a bound on the event, far above its time
		t.Fatal("no acknowledgement")
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_changed","arguments":{"token":"m"},` + meta2026 + `}}`)
	before, r := p.until("2", 5*time.Second)
	if !bytes.Contains(r.Result, []byte(`"resultType":"complete"`)) || tokenOf(t, r) != "m" {
		t.Errorf("2026 call: %s", r.Result)
	}
	if len(before) != 1 || !bytes.Contains(before[0], []byte(`"notifications/tools/list_changed"`)) || !bytes.Contains(before[0], []byte(`subscriptionId":"L"`)) {
		t.Errorf("want one tagged list_changed (none untagged on a connection that never initialized), got %q", before)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if before, r := p.until("3", 5*time.Second); len(before) != 0 || bytes.Contains(r.Result, []byte("resultType")) {
		t.Errorf("a cancelled listen answered %q; a legacy ping got %s", before, r.Result)
	}
}

// With Modern, the HTTP server answers 2026-07-28 requests without a
// session, streams list changes on subscriptions/listen, and a cut stream
// of a stateless call cannot be resumed.
func TestModernHTTP(t *testing.T) {
	p := startHTTP(t, Options{Modern: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listen, err := p.do(ctx, http.MethodPost, "", `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},`+meta2026+`}}`)
	if err != nil || listen.StatusCode != http.StatusOK {
		t.Fatalf("listen: %v %v", listen, err)
	}
	defer listen.Body.Close()
	rd := sse.NewReader(listen.Body, 1<<20)
	if ev, err := rd.Next(); err != nil || !bytes.Contains(ev.Data, []byte(`"notifications/subscriptions/acknowledged"`)) {
		t.Fatalf("acknowledgement: %q %v", ev.Data, err)
	}
	resp, err := p.do(context.Background(), http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_changed","arguments":{"token":"m"},`+meta2026+`}}`)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := events(t, resp.Body)
	resp.Body.Close()
	if m := answerIn(evs); m == nil || tokenOf(t, m) != "m" || !bytes.Contains(m.Result, []byte(`"resultType":"complete"`)) {
		t.Errorf("2026 call: %+v", evs)
	}
	if ev, err := rd.Next(); err != nil || !bytes.Contains(ev.Data, []byte(`subscriptionId":"L"`)) || !bytes.Contains(ev.Data, []byte("list_changed")) {
		t.Errorf("listen stream after list_changed: %q %v", ev.Data, err)
	}
	resp, err = p.do(context.Background(), http.MethodPost, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"drop","arguments":{"token":"d","events":1},`+meta2026+`}}`)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ = events(t, resp.Body)
	resp.Body.Close()
	if answerIn(evs) != nil || len(evs) != 2 {
		t.Errorf("a stateless drop: %+v; want the priming event and one notification, no answer", evs)
	}
	if p.h.Sessions() != 0 {
		t.Errorf("%d sessions made by stateless requests", p.h.Sessions())
	}
	// Without Modern, no session is no request.
	legacy := startHTTP(t, Options{})
	resp, err = legacy.do(context.Background(), http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta2026+`}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("legacy server, no session: HTTP %d, want 400", resp.StatusCode)
	}
}
