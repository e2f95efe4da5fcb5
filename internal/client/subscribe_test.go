package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/testwait"
)

// subscribeServer is an official-SDK server speaking 2026-07-28 with two
// resources; its subscribe and unsubscribe handlers report to events, and
// it refuses mem://forbidden. Without subscribe handlers it does not
// announce resources.subscribe.
func subscribeServer(t *testing.T, handlers bool) (*sdk.Server, string, chan string) {
	t.Helper()
	events := make(chan string, 64)
	opts := &sdk.ServerOptions{}
	if handlers {
		opts.SubscribeHandler = func(_ context.Context, req *sdk.SubscribeRequest) error {
			if req.Params.URI == "mem://forbidden" {
				return errors.New("no")
			}
			events <- "subscribe " + req.Params.URI
			return nil
		}
		opts.UnsubscribeHandler = func(_ context.Context, req *sdk.UnsubscribeRequest) error {
			events <- "unsubscribe " + req.Params.URI
			return nil
		}
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "subs", Version: "1"}, opts)
	for _, uri := range []string{"mem://a", "mem://b", "mem://forbidden"} {
		srv.AddResource(&sdk.Resource{URI: uri, Name: uri}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
		})
	}
	// The SDK speaks 2026-07-28 over HTTP only when stateless.
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	return srv, ts.URL, events
}

// TestModernResourceSubscriptions: 2026-07-28 has no resources/subscribe;
// the client serves it by naming the subscribed URIs in its
// subscriptions/listen stream, and the upstream's updates reach
// OnNotification for exactly those URIs.
func TestModernResourceSubscriptions(t *testing.T) {
	srv, url, events := subscribeServer(t, true)
	updates := make(chan string, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: url}), client.Options{
		Name: "up", Protocol: "2026", Timeout: 5 * time.Second,
		OnNotification: func(method string, params json.RawMessage) {
			if method != "notifications/resources/updated" {
				updates <- method // the acknowledgement, say: a failure below
				return
			}
			if strings.Contains(string(params), "subscriptionId") {
				updates <- "leaked the upstream's subscription id: " + string(params)
				return
			}
			var p struct{ URI string }
			_ = json.Unmarshal(params, &p)
			updates <- p.URI
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Modern() {
		t.Fatalf("negotiated %s, want 2026-07-28", c.ProtocolVersion())
	}

	call := func(method, uri string) *jsonrpc.Message {
		t.Helper()
		resp, err := c.Call(ctx, method, json.RawMessage(`{"uri":"`+uri+`"}`), client.CallOptions{})
		if err != nil {
			t.Fatalf("%s %s: %v", method, uri, err)
		}
		return resp
	}
	ok := func(method, uri string) {
		t.Helper()
		if resp := call(method, uri); resp.Error != nil || string(resp.Result) != "{}" {
			t.Fatalf("%s %s: got error %v, result %s", method, uri, resp.Error, resp.Result)
		}
	}
	update := func(uri string) {
		t.Helper()
		if err := srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want ...string) {
		t.Helper()
		got := map[string]bool{}
		for len(got) < len(want) {
			select {
			case u := <-updates:
				if !strings.HasPrefix(u, "mem://") || !strings.Contains(strings.Join(want, " "), u) {
					t.Fatalf("got %q, want %q", u, want)
				}
				got[u] = true
			case <-time.After(testwait.Long): // a bound on the event, far above its time
				t.Fatalf("got %v, want %q", got, want)
			}
		}
	}
	// awaitEvent returns what the upstream's handlers saw before want.
	awaitEvent := func(want string) []string {
		t.Helper()
		var before []string
		for {
			select {
			case ev := <-events:
				if ev == want {
					return before
				}
				before = append(before, ev)
			case <-time.After(testwait.Long): // a bound on the event, far above its time
				t.Fatalf("the upstream never saw %q", want)
			}
		}
	}

	ok("resources/subscribe", "mem://a")
	update("mem://a")
	expect("mem://a")

	ok("resources/unsubscribe", "mem://a")
	awaitEvent("unsubscribe mem://a") // the old stream is gone upstream
	update("mem://a")
	ok("resources/subscribe", "mem://b")
	update("mem://b")
	expect("mem://b") // and not the mem://a update before it

	ok("resources/subscribe", "mem://a")
	// No gap: the stream for {b, a} was acknowledged before the one for {b} ended.
	if before := awaitEvent("unsubscribe mem://b"); !slices.Contains(before, "subscribe mem://a") {
		t.Errorf("the old stream ended before the new one subscribed: %q", before)
	}
	update("mem://a")
	update("mem://b")
	expect("mem://a", "mem://b")

	resp := call("resources/subscribe", "mem://forbidden")
	if resp.Error == nil || !strings.Contains(resp.Error.Message, "mem://forbidden") {
		t.Fatalf("subscribe to a refused URI: got error %v, result %s; want an error naming it", resp.Error, resp.Result)
	}
	update("mem://a") // the stream before the refusal still stands
	expect("mem://a")

	select {
	case u := <-updates:
		t.Fatalf("unexpected %q", u)
	case <-time.After(200 * time.Millisecond): // a negative check: a wait cut short only misses a failure
	}
}

// TestModernSubscribeUnsupported: an upstream that does not announce
// resources.subscribe gets no subscriptions/listen for resources; the caller
// is told why.
func TestModernSubscribeUnsupported(t *testing.T) {
	_, url, _ := subscribeServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: url}), client.Options{Name: "up", Protocol: "2026"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Call(ctx, "resources/subscribe", json.RawMessage(`{"uri":"mem://a"}`), client.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Error == nil || !strings.Contains(resp.Error.Message, "does not support resource subscriptions") {
		t.Fatalf("got error %v, result %s; want: does not support resource subscriptions", resp.Error, resp.Result)
	}
}

// TestModernSubscribeRefusedInAck: an upstream may open the stream but leave
// a URI out of its acknowledgement; that subscription is refused, and the
// ones before it stand.
func TestModernSubscribeRefusedInAck(t *testing.T) {
	listens := make(chan []string, 8)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Notifications struct {
					ResourceSubscriptions []string `json:"resourceSubscriptions"`
				} `json:"notifications"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch req.Method {
		case "server/discover":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"supportedVersions":["2026-07-28"],` +
				`"capabilities":{"resources":{"subscribe":true}},"serverInfo":{"name":"fake","version":"1"}}}`))
		case "subscriptions/listen":
			uris := req.Params.Notifications.ResourceSubscriptions
			listens <- uris
			acked, _ := json.Marshal(slices.DeleteFunc(slices.Clone(uris), func(u string) bool { return u == "mem://refused" }))
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(`data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"resourceSubscriptions":` +
				string(acked) + `},"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(req.ID) + `}}}` + "\n\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			http.Error(w, "unexpected "+req.Method, http.StatusBadRequest)
		}
	}))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, client.NewStreamable(client.HTTPConfig{URL: ts.URL}), client.Options{Name: "up", Protocol: "2026"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// subscribe returns the answer and the URIs its stream asked for.
	subscribe := func(uri string) (*jsonrpc.Message, []string) {
		t.Helper()
		resp, err := c.Call(ctx, "resources/subscribe", json.RawMessage(`{"uri":"`+uri+`"}`), client.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return resp, <-listens
	}
	if resp, _ := subscribe("mem://a"); resp.Error != nil {
		t.Fatalf("subscribe mem://a: %v", resp.Error)
	}
	resp, _ := subscribe("mem://refused")
	if resp.Error == nil || !strings.Contains(resp.Error.Message, "refused the subscription to mem://refused") {
		t.Fatalf("subscribe mem://refused: got error %v, result %s; want refused", resp.Error, resp.Result)
	}
	resp, asked := subscribe("mem://b")
	if resp.Error != nil {
		t.Fatalf("subscribe mem://b: %v", resp.Error)
	}
	if !slices.Equal(asked, []string{"mem://a", "mem://b"}) {
		t.Errorf("after the refusal the stream asked for %q, want [mem://a mem://b]", asked)
	}
}
