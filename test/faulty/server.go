package faulty

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Name is serverInfo.name (default "faulty").
	Name string
	// Versions are the protocol revisions initialize accepts, newest first
	// (default mcp.SupportedVersions). A client asking for another gets the
	// first.
	Versions []string
	// Stderr receives the stderr fault's flood (default io.Discard; the
	// program passes os.Stderr).
	Stderr io.Writer
	// SessionTTL expires HTTP sessions idle for longer (HTTP 404 after);
	// 0 keeps them until DELETE, crash or eviction.
	SessionTTL time.Duration
	// MaxSessions bounds the HTTP sessions kept (default 4096); the least
	// recently used is forgotten beyond it, as a server with a session cap
	// would.
	MaxSessions int
	// Grandchild starts the grandchild fault's process and returns its pid
	// (default: this executable again with FAULTY_GRANDCHILD=1 in its
	// environment, which SleepIfGrandchild turns into a sleep).
	Grandchild func() (int, error)
	// Now is the clock for session expiry (default time.Now).
	Now func() time.Time
	// Modern also speaks 2026-07-28: server/discover, requests that carry
	// their revision in _meta (answered with resultType; over HTTP without
	// a session), and subscriptions/listen for list changes.
	Modern bool
}

// Server is one fault-injecting MCP server. Its tool list and counters are
// shared by every transport it serves.
type Server struct {
	opts Options
	gen  atomic.Int64 // tool list generation, bumped by list_changed

	mu     sync.Mutex
	served map[Kind]int
	// listeners get list_changed notifications (stdio connections, HTTP
	// sessions' GET streams).
	listeners map[int]func([]byte)
	nextL     int
}

// NewServer returns a server with opts.
func NewServer(opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "faulty"
	}
	if len(opts.Versions) == 0 {
		for _, v := range mcp.SupportedVersions {
			opts.Versions = append(opts.Versions, string(v))
		}
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 4096
	}
	if opts.Grandchild == nil {
		opts.Grandchild = startGrandchild
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Server{opts: opts, served: map[Kind]int{}, listeners: map[int]func([]byte){}}
}

// Served reports how many calls of kind the server has received.
func (s *Server) Served(kind Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[kind]
}

// Generation is the tool list's generation: list_changed calls so far.
func (s *Server) Generation() int64 { return s.gen.Load() }

func (s *Server) count(k Kind) {
	s.mu.Lock()
	s.served[k]++
	s.mu.Unlock()
}

func (s *Server) listen(fn func([]byte)) (stop func()) {
	s.mu.Lock()
	id := s.nextL
	s.nextL++
	s.listeners[id] = fn
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.listeners, id)
		s.mu.Unlock()
	}
}

// changeTools bumps the generation and tells every listener.
func (s *Server) changeTools() {
	s.gen.Add(1)
	note, _ := jsonrpc.Encode(jsonrpc.NewNotification(mcp.NotificationToolsListChanged, nil))
	s.mu.Lock()
	fns := make([]func([]byte), 0, len(s.listeners))
	for _, fn := range s.listeners {
		fns = append(fns, fn)
	}
	s.mu.Unlock()
	for _, fn := range fns {
		fn(note)
	}
}

// genTool is the tool list_changed adds on odd generations: its name
// changes with every generation, so a caller holding a stale list calls a
// tool that is gone.
func genTool(gen int64) (string, bool) {
	if gen%2 == 0 {
		return "", false
	}
	return "gen_" + strconv.FormatInt(gen, 10), true
}

// answer serves every request that is not a tools/call of a fault kind:
// the lifecycle, lists, the state resource and the gen_N tool.
func (s *Server) answer(msg *jsonrpc.Message) *jsonrpc.Message {
	switch msg.Method {
	case mcp.MethodInitialize:
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		v := s.opts.Versions[0]
		if slices.Contains(s.opts.Versions, p.ProtocolVersion) {
			v = p.ProtocolVersion
		}
		res, _ := json.Marshal(map[string]any{
			"protocolVersion": v,
			"capabilities":    capabilities,
			"serverInfo":      map[string]string{"name": s.opts.Name, "version": "0"},
			"instructions":    "A fault-injecting test server: each tool is a fault, see the package faulty.",
		})
		return jsonrpc.NewResult(msg.ID, res)
	case mcp.MethodServerDiscover:
		if !s.opts.Modern {
			break
		}
		res, _ := json.Marshal(map[string]any{
			"supportedVersions": append([]string{string(mcp.Version20260728)}, s.opts.Versions...),
			"capabilities":      capabilities,
			"serverInfo":        map[string]string{"name": s.opts.Name, "version": "0"},
		})
		return jsonrpc.NewResult(msg.ID, res)
	case mcp.MethodPing, mcp.MethodLoggingSetLevel:
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{}`))
	case mcp.MethodToolsList:
		return jsonrpc.NewResult(msg.ID, s.toolList())
	case mcp.MethodResourcesList:
		return jsonrpc.NewResult(msg.ID, json.RawMessage(`{"resources":[{"uri":"faulty://state","name":"state","mimeType":"application/json"}]}`))
	case mcp.MethodResourcesRead:
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		if p.URI != "faulty://state" {
			return jsonrpc.NewError(msg.ID, &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: "resource not found: " + p.URI})
		}
		state, _ := json.Marshal(map[string]any{"generation": s.gen.Load()})
		res, _ := json.Marshal(map[string]any{"contents": []map[string]string{{"uri": p.URI, "mimeType": "application/json", "text": string(state)}}})
		return jsonrpc.NewResult(msg.ID, res)
	case mcp.MethodToolsCall:
		f, name, err := parseCall(msg.Params)
		if err != nil {
			return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err))
		}
		if g, ok := genTool(s.gen.Load()); ok && name == g {
			return jsonrpc.NewResult(msg.ID, result(f.Token, 0))
		}
		return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "unknown tool %q (the faults are %v; gen_N tools come and go with list_changed)", name, Kinds))
	}
	return jsonrpc.NewError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %q", msg.Method))
}

// capabilities are what the server offers, on every revision.
var capabilities = json.RawMessage(`{"tools":{"listChanged":true},"resources":{},"logging":{}}`)

// modern reports whether msg is a 2026-07-28 request: its _meta names the
// revision.
func modern(msg *jsonrpc.Message) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(msg.Params, &p) != nil {
		return false
	}
	var v string
	return json.Unmarshal(p.Meta[mcp.MetaProtocolVersion], &v) == nil && v == string(mcp.Version20260728)
}

// complete marks a result of a 2026-07-28 request as complete (the
// revision's resultType); other answers are unchanged.
func complete(m *jsonrpc.Message, modern bool) *jsonrpc.Message {
	if !modern || m.Error != nil || len(m.Result) < 2 || m.Result[0] != '{' || bytes.Contains(m.Result, []byte(`"resultType"`)) {
		return m
	}
	res := []byte(`{"resultType":"complete"`)
	if rest := bytes.TrimSpace(m.Result[1:]); len(rest) > 0 && rest[0] != '}' {
		res = append(res, ',')
	}
	m.Result = append(res, m.Result[1:]...)
	return m
}

// listenParams reads subscriptions/listen's params: whether tool list
// changes are wanted, and the notifications object to acknowledge.
func listenParams(msg *jsonrpc.Message) (tools bool, ack json.RawMessage) {
	var p struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	var n struct {
		Tools bool `json:"toolsListChanged"`
	}
	_ = json.Unmarshal(p.Notifications, &n)
	if len(p.Notifications) == 0 {
		p.Notifications = json.RawMessage(`{}`)
	}
	return n.Tools, p.Notifications
}

// tagged is a notification on a subscriptions/listen stream: its _meta
// names the stream (the listen request's id).
func tagged(method string, id jsonrpc.ID, params map[string]any) []byte {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]json.RawMessage{mcp.MetaSubscriptionID: json.RawMessage(id)}
	p, _ := json.Marshal(params)
	b, _ := jsonrpc.Encode(jsonrpc.NewNotification(method, p))
	return b
}

// isFault reports whether msg is a tools/call of one of the fault kinds.
func isFault(msg *jsonrpc.Message) (Fault, bool) {
	if msg.Method != mcp.MethodToolsCall {
		return Fault{}, false
	}
	f, _, err := parseCall(msg.Params)
	if err != nil || !slices.Contains(Kinds, f.Kind) {
		return Fault{}, false
	}
	return f, true
}

func (s *Server) toolList() json.RawMessage {
	schema := json.RawMessage(`{"type":"object","properties":{"token":{"type":"string"},"delay_ms":{"type":"integer"},"bytes":{"type":"integer"},"events":{"type":"integer"},"no_resume":{"type":"boolean"}}}`)
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	tools := make([]tool, 0, len(Kinds)+1)
	for _, k := range Kinds {
		tools = append(tools, tool{string(k), "fault: " + string(k), schema})
	}
	if g, ok := genTool(s.gen.Load()); ok {
		tools = append(tools, tool{g, "present in this tool list generation only", schema})
	}
	b, _ := json.Marshal(map[string]any{"tools": tools})
	return b
}

// progressToken returns params._meta.progressToken, raw.
func progressToken(params json.RawMessage) json.RawMessage {
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Meta.ProgressToken
}

// notification is the i-th of n messages a call sends before its answer:
// progress when the caller gave a token, else a log message.
func notification(token json.RawMessage, i, n int) []byte {
	var m *jsonrpc.Message
	if len(token) > 0 {
		p, _ := json.Marshal(map[string]any{"progressToken": token, "progress": i, "total": n})
		m = jsonrpc.NewNotification(mcp.NotificationProgress, p)
	} else {
		p, _ := json.Marshal(map[string]any{"level": "info", "logger": "faulty", "data": fmt.Sprintf("event %d of %d", i, n)})
		m = jsonrpc.NewNotification(mcp.NotificationMessage, p)
	}
	b, _ := jsonrpc.Encode(m)
	return b
}

// garbage is what the garbage fault writes, one item per line or event:
// bytes of noise that is not JSON, a JSON object cut short, invalid UTF-8,
// and a response to a request nobody sent.
func garbage(n int) [][]byte {
	noise := make([]byte, n)
	const alphabet = "<>#!~%&*()[]|abcdefghijklmnopqrstuvwxyz0123456789 "
	for i := range noise {
		noise[i] = alphabet[(i*7+i/13)%len(alphabet)]
	}
	return [][]byte{
		noise,
		[]byte(`{"jsonrpc":"2.0","id":`),
		{0xff, 0xfe, '{', 0xc3, 0x28, '}'},
		[]byte(`{"jsonrpc":"2.0","id":"faulty-stray-response","result":{"content":[{"type":"text","text":"stray"}]}}`),
	}
}

// flood writes n bytes of lines to w, the stderr fault.
func flood(w io.Writer, n int) {
	line := strings.Repeat("stderr flood line from the faulty server ", 2)[:79] + "\n"
	for n > 0 {
		k := min(n, len(line))
		if _, err := io.WriteString(w, line[len(line)-k:]); err != nil {
			return
		}
		n -= k
	}
}

// GrandchildEnv marks the grandchild fault's process.
const GrandchildEnv = "FAULTY_GRANDCHILD"

// SleepIfGrandchild makes this process the grandchild fault's sleeper when
// GrandchildEnv is set: it never returns. The program calls it first.
func SleepIfGrandchild() {
	if os.Getenv(GrandchildEnv) == "" {
		return
	}
	select {}
}

func startGrandchild() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), GrandchildEnv+"=1")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	// Reap it when it is killed, so it never lingers as a zombie of ours;
	// the goroutine ends with it (or with this process).
	go func() { _ = cmd.Wait() }()
	return pid, nil
}

// errCrash is returned by the stdio server when a call asked it to crash.
var errCrash = errors.New("faulty: crash requested")

// ErrCrash reports whether err is the stdio server's crash request (the
// program then exits with status 3).
func ErrCrash(err error) bool { return errors.Is(err, errCrash) }
