package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// fakeUpstream is an in-memory MCP server for catalog tests: a fixed
// catalog of raw JSON items, paged pageSize at a time (0: one page), and
// handlers for the routed methods. It speaks 2025-11-25 with initialize.
type fakeUpstream struct {
	pageSize                             int
	noListChanged                        bool   // declare no tools/prompts listChanged
	handleList                           string // members added to every list result
	handle                               func(method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
	mu                                   sync.Mutex
	tools, prompts, resources, templates []string
	skills                               []string // skills/list entries (the skills extension, with directoryRead)
	got                                  []fakeRequest
	listCalls                            map[string]int
}

// setResources replaces the upstream's resources (as a change it then
// announces would).
func (f *fakeUpstream) setResources(r []string) {
	f.mu.Lock()
	f.resources = r
	f.mu.Unlock()
}

type fakeRequest struct {
	method string
	params json.RawMessage
}

func (f *fakeUpstream) capabilities() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var caps []string
	announce := `{"listChanged":true}`
	if f.noListChanged {
		announce = `{}`
	}
	if len(f.tools) > 0 {
		caps = append(caps, `"tools":`+announce)
	}
	if len(f.prompts) > 0 {
		caps = append(caps, `"prompts":`+announce)
	}
	if len(f.resources) > 0 || len(f.templates) > 0 || len(f.skills) > 0 {
		caps = append(caps, `"resources":{"listChanged":true}`)
	}
	if len(f.skills) > 0 {
		caps = append(caps, `"extensions":{"`+mcp.ExtensionSkills+`":{"directoryRead":true}}`)
	}
	return "{" + strings.Join(caps, ",") + "}"
}

// requests returns the routed requests the upstream received.
func (f *fakeUpstream) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

func (f *fakeUpstream) lists(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listCalls[method]
}

func (f *fakeUpstream) answer(method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	page := func(key string, all *[]string) (json.RawMessage, *jsonrpc.Error) {
		f.mu.Lock()
		if f.listCalls == nil {
			f.listCalls = map[string]int{}
		}
		f.listCalls[method]++
		items := slices.Clone(*all)
		f.mu.Unlock()
		var p struct {
			Cursor string `json:"cursor"`
		}
		_ = json.Unmarshal(params, &p)
		from := 0
		if p.Cursor != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(p.Cursor, "at-"))
			if err != nil || n > len(items) {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "bad cursor %q", p.Cursor)
			}
			from = n
		}
		to := len(items)
		if f.pageSize > 0 && from+f.pageSize < to {
			to = from + f.pageSize
		}
		out := `{"` + key + `":[` + strings.Join(items[from:to], ",") + `],"x-upstream-member":1` + f.handleList
		if to < len(items) {
			out += `,"nextCursor":"at-` + strconv.Itoa(to) + `"`
		}
		return json.RawMessage(out + "}"), nil
	}
	switch method {
	case mcp.MethodInitialize:
		return json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":` + f.capabilities() + `,"serverInfo":{"name":"fake","version":"1"}}`), nil
	case mcp.MethodPing:
		return json.RawMessage(`{}`), nil
	case mcp.MethodToolsList:
		return page("tools", &f.tools)
	case mcp.MethodPromptsList:
		return page("prompts", &f.prompts)
	case mcp.MethodResourcesList:
		return page("resources", &f.resources)
	case mcp.MethodResourcesTemplatesList:
		return page("resourceTemplates", &f.templates)
	case mcp.MethodSkillsList:
		return page("skills", &f.skills)
	}
	f.mu.Lock()
	f.got = append(f.got, fakeRequest{method, params})
	f.mu.Unlock()
	if f.handle != nil {
		return f.handle(method, params)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no %s here", method)
}

// memTransport connects a client to a fakeUpstream in memory.
type memTransport struct {
	up      *fakeUpstream
	deliver client.DeliverFunc
	done    chan struct{}
	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup
}

func (t *memTransport) Start(_ context.Context, deliver client.DeliverFunc) error {
	t.deliver = deliver
	return nil
}

func (t *memTransport) Send(_ context.Context, b []byte) error {
	msg, err := jsonrpc.Parse(b)
	if err != nil {
		return err
	}
	if msg.Kind() != jsonrpc.KindRequest {
		return nil
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return client.ErrClosed
	}
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		res, jerr := t.up.answer(msg.Method, msg.Params)
		reply := jsonrpc.NewResult(msg.ID, res)
		if jerr != nil {
			reply = jsonrpc.NewError(msg.ID, jerr)
		}
		out, _ := jsonrpc.Encode(reply)
		t.deliver(out, nil)
	}()
	return nil
}

func (t *memTransport) Done() <-chan struct{} { return t.done }
func (t *memTransport) Err() error            { return nil }

func (t *memTransport) Close() error {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.done)
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// fakeHost starts a host over in-memory upstreams and waits until they
// are connected.
func fakeHost(t testing.TB, ups map[string]*fakeUpstream) *host.Host {
	t.Helper()
	return fakeHostWith(t, ups, nil)
}

// fakeHostWith is fakeHost with each upstream's config changed by mod.
func fakeHostWith(t testing.TB, ups map[string]*fakeUpstream, mod func(name string, u *config.Upstream)) *host.Host {
	t.Helper()
	cfg := &config.Config{Separator: "__", Upstreams: map[string]*config.Upstream{}}
	for name := range ups {
		cfg.Upstreams[name] = &config.Upstream{Protocol: "legacy", Timeout: config.Duration(10 * time.Second)}
		if mod != nil {
			mod(name, cfg.Upstreams[name])
		}
	}
	h := host.New(cfg, host.Options{Transport: func(name string) (client.Transport, error) {
		up := ups[name]
		if up == nil {
			return nil, fmt.Errorf("no fake upstream %q", name)
		}
		return &memTransport{up: up, done: make(chan struct{})}, nil
	}})
	h.Start()
	t.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for name := range ups {
		if s, err := h.Upstream(name).State(); s != host.StateReady {
			t.Fatalf("fake upstream %s is %s: %v", name, s, err)
		}
	}
	return h
}

// items returns n raw items {"<field>":"<prefix><i>", ...} with members
// the gateway must keep byte for byte.
func items(field, prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"%s":"%s%02d", "annotations" : {"x":[1, 2.50]},"_meta":{"k":"v"}}`, field, prefix, i)
	}
	return out
}
