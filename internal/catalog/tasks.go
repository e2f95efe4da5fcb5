package catalog

// Tasks through the gateway: the 2025-11-25 tasks utility (the tasks
// capability, params.task on tools/call, tasks/get, tasks/result,
// tasks/list, tasks/cancel, notifications/tasks/status) and its 2026-07-28
// extension form (io.modelcontextprotocol/tasks: server-directed
// CreateTaskResult, tasks/get inlining the result, tasks/update,
// tasks/cancel). Each form is passed through between a client and an
// upstream that speak it; the gateway does not translate one into the other.
//
// Task ids. An upstream's task id is its own and names a task on one
// upstream connection; the gateway hands out instead a token of its own: an
// AEAD seal (AES-GCM) of the upstream, the upstream's task id, the route,
// the principal that created it (a hash of its key), the task's form and,
// for a stateful upstream or the anonymous principal (auth off), the
// session (sessionBound). The nonce is derived from the
// plaintext (an HMAC), so one task always gets the same token — the client
// matches the CreateTaskResult, tasks/list items and notifications by it —
// and tokens reveal nothing but that equality. The key comes from the
// session key ring (sessions.key_file), so every replica with the ring opens
// any replica's tokens; without one it is random per process. A token that
// does not open, or opens for another principal or route, is answered as an
// unknown task (-32602), and nothing reaches an upstream.
//
// What a token cannot do is list: tasks/list (2025-11-25) asks the route's
// upstreams and keeps only the tasks the gateway saw created by the caller,
// from a bounded index (sessions.max_tasks) that also routes
// notifications/tasks/status to the session that created the task. The
// index is this replica's; entries live for the task's ttl.

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/host"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

const (
	taskTokenPrefix = "mcpgw-task1."
	taskTokenAD     = "mcpgw task id v1"
	// DefaultMaxTasks is sessions.max_tasks' default.
	DefaultMaxTasks = 10000
	// defaultTaskTTL is how long a 2025-11-25 task without a ttl stays
	// listed; maxTaskTTL caps any ttl (null: unlimited).
	defaultTaskTTL = time.Hour
	maxTaskTTL     = 24 * time.Hour
	// taskListPage bounds a tasks/list page, and taskListCalls the upstream
	// pages one downstream page may take to fill (most items may be other
	// principals').
	taskListPage  = 100
	taskListCalls = 16
)

// Task forms: which revision's tasks a token names.
const (
	formUtility   = "2025" // the 2025-11-25 tasks utility
	formExtension = "2026" // the 2026-07-28 tasks extension
)

// TaskOwner is who a task belongs to, as the router knows the caller.
type TaskOwner struct {
	Route     string // the route path
	Principal string // auth.Principal.Key of the caller ("" when auth is off)
	Session   string // the downstream session id ("" for 2026-07-28 requests)
}

// taskOwnerFrom is the owner of the tasks a request creates and uses: its
// caller as the router recorded it (host.WithCaller, on every request it
// dispatches).
func taskOwnerFrom(ctx context.Context) TaskOwner {
	c := host.CallerOf(ctx)
	return TaskOwner{Route: c.Route, Principal: c.Principal, Session: c.Session}
}

// taskClaims is what a downstream task id carries.
type taskClaims struct {
	Upstream string `json:"u"`
	ID       string `json:"t"`           // the upstream's own task id
	Route    string `json:"r"`           // the route it was created on
	Owner    string `json:"o,omitempty"` // tag of the principal's key
	Form     string `json:"f"`
	Session  string `json:"s,omitempty"` // tag of the session, for a stateful upstream
}

// tag is a short non-reversible digest of a principal key or session id;
// it is sealed in tokens, never shown.
func tag(s string) string {
	if s == "" {
		return ""
	}
	h := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(h[:16])
}

// tasks is the host's task-id sealer and its index of 2025-11-25 tasks.
type tasks struct {
	keys atomic.Pointer[taskKeys] // swapped by setKeys (a rotated ring)
	max  int
	m    *metrics.Metrics
	now  func() time.Time

	mu       sync.Mutex
	index    map[taskKey]*taskEntry
	reserved int // slots held by task-augmented calls under way
}

type taskKey struct{ upstream, id string }

type taskEntry struct {
	owner    TaskOwner
	stateful bool
	expires  time.Time
}

// taskKeys are the keys derived from one key ring.
type taskKeys struct {
	aeads []cipher.AEAD // newest first: the first seals, any opens
	nonce []byte        // HMAC key deriving the (deterministic) nonce
}

// newTasks derives the task keys from the session key ring (a key of their
// own per ring key) or makes a random one.
func newTasks(ring [][]byte, max int, m *metrics.Metrics) *tasks {
	if max <= 0 {
		max = DefaultMaxTasks
	}
	t := &tasks{max: max, m: m, now: time.Now, index: map[taskKey]*taskEntry{}}
	if len(ring) == 0 {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		ring = [][]byte{k}
	}
	t.setKeys(ring)
	return t
}

// setKeys derives the keys of ring (non-empty) and uses them from now on.
func (t *tasks) setKeys(ring [][]byte) {
	k := &taskKeys{}
	for i, key := range ring {
		block, _ := aes.NewCipher(derive(key, "mcpgw task id aead v1")) // 32 bytes: always valid
		a, _ := cipher.NewGCM(block)
		k.aeads = append(k.aeads, a)
		if i == 0 {
			k.nonce = derive(key, "mcpgw task id nonce v1")
		}
	}
	t.keys.Store(k)
}

// SetTaskKeys rekeys the task ids of h with a rotated session key ring
// (sessions.key_file reread on a reload): ids are sealed with its first
// key from now on and opened with any, so a rotation loses no task. A
// host without a ring keeps its random key.
func SetTaskKeys(h *host.Host, ring [][]byte) {
	if len(ring) > 0 {
		tasksOf(h).setKeys(ring)
	}
}

func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// seal returns the downstream id for c. Equal claims give equal ids.
func (t *tasks) seal(c taskClaims) string {
	plain, _ := json.Marshal(c)
	k := t.keys.Load()
	a := k.aeads[0]
	n := hmac.New(sha256.New, k.nonce)
	n.Write(plain)
	nonce := n.Sum(nil)[:a.NonceSize()]
	return taskTokenPrefix + base64.RawURLEncoding.EncodeToString(a.Seal(nonce[:len(nonce):len(nonce)], nonce, plain, []byte(taskTokenAD)))
}

// open returns the claims of a token sealed with any key of the ring.
func (t *tasks) open(token string) (taskClaims, bool) {
	var c taskClaims
	plain, ok := t.openSealed(token, taskTokenPrefix, taskTokenAD)
	if !ok || json.Unmarshal(plain, &c) != nil || c.Upstream == "" || c.ID == "" {
		return taskClaims{}, false
	}
	return c, true
}

// openSealed returns what a token of the given prefix and associated data
// seals, opened with any key of the ring.
func (t *tasks) openSealed(token, prefix, ad string) ([]byte, bool) {
	body, ok := strings.CutPrefix(token, prefix)
	if !ok {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return nil, false
	}
	for _, a := range t.keys.Load().aeads {
		if len(raw) < a.NonceSize() {
			continue
		}
		if plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], []byte(ad)); err == nil {
			return plain, true
		}
	}
	return nil, false
}

// claims are the token claims for a task of upstream created (or used) by o.
func claims(upstream, id, form string, o TaskOwner, stateful bool) taskClaims {
	c := taskClaims{Upstream: upstream, ID: id, Route: o.Route, Owner: tag(o.Principal), Form: form}
	if sessionBound(o, stateful) {
		c.Session = tag(o.Session)
	}
	return c
}

// sessionBound reports whether a task o creates belongs to o's session
// rather than to its principal alone: on a stateful upstream (the task
// lives on the session's own connection), and for the anonymous principal
// (with auth off every caller is that one principal, so only the session
// tells one caller from another). A 2026-07-28 anonymous caller has no
// session: its task ids are bound to the route only, and the id itself —
// an unguessable sealed token, handed to the caller that created the task
// and listed to nobody (the 2026 tasks extension has no tasks/list) — is
// what shows it is the task's holder.
func sessionBound(o TaskOwner, stateful bool) bool {
	return stateful || o.Principal == ""
}

// ownedBy reports whether o may use the task c names.
func (c taskClaims) ownedBy(o TaskOwner) bool {
	return c.Route == o.Route && c.Owner == tag(o.Principal) && (c.Session == "" || c.Session == tag(o.Session))
}

// reserve holds an index slot for a task-augmented call about to be sent;
// release gives it back (created records the task first, when one was).
func (t *tasks) reserve() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.index)+t.reserved >= t.max {
		t.purgeLocked()
	}
	if len(t.index)+t.reserved >= t.max {
		t.m.TaskRefused()
		return false
	}
	t.reserved++
	return true
}

func (t *tasks) release() {
	t.mu.Lock()
	t.reserved--
	t.mu.Unlock()
}

// record indexes a 2025-11-25 task (its slot was reserved).
func (t *tasks) record(k taskKey, e *taskEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.index[k] = e
	t.m.TasksTracked(len(t.index))
}

// purgeLocked drops expired entries.
func (t *tasks) purgeLocked() {
	now := t.now()
	for k, e := range t.index {
		if now.After(e.expires) {
			delete(t.index, k)
		}
	}
	t.m.TasksTracked(len(t.index))
}

// entry returns the live index entry of a task.
func (t *tasks) entry(k taskKey) *taskEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.index[k]
	if e != nil && t.now().After(e.expires) {
		delete(t.index, k)
		t.m.TasksTracked(len(t.index))
		return nil
	}
	return e
}

// ttlOf reads a 2025-11-25 task's ttl (ms; null: unlimited) as an index
// lifetime.
func ttlOf(task json.RawMessage) time.Duration {
	v, ok := rawjson.Get(task, "ttl")
	if !ok {
		return defaultTaskTTL
	}
	var ms *float64
	if json.Unmarshal(v, &ms) != nil || ms == nil || *ms <= 0 {
		return maxTaskTTL
	}
	return min(time.Duration(*ms)*time.Millisecond, maxTaskTTL)
}

// taskNotFound is the one answer for a task id that is not the caller's:
// unknown, forged, another principal's or another route's look the same.
func taskNotFound(token string) *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "task not found: %q (pass a taskId this route handed out to you)", token)
}

// missingTasksExtension is the -32021 a 2026-07-28 caller gets for the
// tasks methods when its request does not declare the extension.
func missingTasksExtension(method string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{mcp.ExtensionTasks: map[string]any{}}}})
	return &jsonrpc.Error{
		Code:    mcp.CodeMissingRequiredClientCapability,
		Message: fmt.Sprintf("%s needs the %s extension: declare it in _meta[%q].extensions", method, mcp.ExtensionTasks, mcp.MetaClientCapabilities),
		Data:    data,
	}
}

// declaresTasksExtension reports whether the caller's capabilities (its
// request's clientCapabilities) include the tasks extension.
func declaresTasksExtension(ctx context.Context) bool {
	caps, _ := host.CallerCapabilities(ctx)
	exts, ok := rawjson.Get(caps, "extensions")
	if !ok {
		return false
	}
	v, ok := rawjson.Get(exts, mcp.ExtensionTasks)
	return ok && string(v) != "null"
}

// callError is the gateway's error for a call that got no answer: the
// gateway's own words for a timeout or a credential, else only that it
// failed, with the detail in the log (errors.go).
func callError(ctx context.Context, u *host.Upstream, method string, err error) *jsonrpc.Error {
	if cerr := credentialError(err); cerr != nil { // errors.go: an upstream credential for the caller
		return cerr
	}
	var te *client.TimeoutError
	switch {
	case errors.As(err, &te):
		return jsonrpc.Errorf(mcp.CodeRequestTimeout, "upstream %q: %v", u.Name(), te)
	case errors.Is(err, context.Canceled):
		return jsonrpc.Errorf(mcp.CodeRequestTimeout, "upstream %q: request cancelled", u.Name())
	}
	return upstreamFailure(ctx, u, method, err) // errors.go
}

// taskCall is what the gateway does about tasks around one tools/call.
type taskCall struct {
	t        *tasks
	upstream string
	owner    TaskOwner
	form     string
	stateful bool
	reserved bool
}

// beginTaskCall prepares a tools/call for the task it may create. Only two
// kinds of call can create one: a 2025-11-25 caller's task-augmented call
// (params.task), which holds an index slot (refused when the index is full:
// better than a task nobody could list) and gets the ids in what the
// upstream sends during the call translated; and a 2026-07-28 caller's that
// declares the extension. Every other call gets nil and costs nothing.
func (v *View) beginTaskCall(ctx context.Context, method, upstream string, params json.RawMessage, opts *client.CallOptions) (*taskCall, *jsonrpc.Error) {
	if method != mcp.MethodToolsCall {
		return nil, nil
	}
	// Made only for a call that can create a task: one allocation less on
	// every other call.
	newCall := func(form string) *taskCall {
		return &taskCall{t: v.tasks, upstream: upstream, owner: taskOwnerFrom(ctx), form: form, stateful: v.ups[upstream].Config().Stateful}
	}
	if opts.PassInputRequired {
		if !declaresTasksExtension(ctx) {
			return nil, nil
		}
		return newCall(formExtension), nil
	}
	if !taskAugmented(params, opts) {
		return nil, nil
	}
	tc := newCall(formUtility)
	if !tc.t.reserve() {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError,
			"mcpgw: %d tasks are held for tasks/list and status notifications (sessions.max_tasks); retry when some expire, or raise sessions.max_tasks", tc.t.max)
	}
	tc.reserved = true
	tc.translate(opts)
	return tc, nil
}

// end gives back an unused slot.
func (tc *taskCall) end() {
	if tc != nil && tc.reserved {
		tc.t.release()
	}
}

// token is the downstream id of one of the upstream's tasks for this caller.
func (tc *taskCall) token(id string) string {
	return tc.t.seal(claims(tc.upstream, id, tc.form, tc.owner, tc.stateful))
}

// result translates a CreateTaskResult's task id (either form) and indexes
// a 2025-11-25 task.
func (tc *taskCall) result(resp *jsonrpc.Message) {
	if tc == nil || resp == nil || resp.Error != nil {
		return
	}
	if tc.form == formExtension {
		// 2026-07-28: a CreateTaskResult's task fields are its own.
		if rt, _ := rawjson.GetString(resp.Result, "resultType"); rt != "task" {
			return
		}
		if id, ok := rawjson.GetString(resp.Result, "taskId"); ok {
			if res, err := rawjson.SetString(resp.Result, "taskId", tc.token(id)); err == nil {
				resp.Result = res
			}
		}
		return
	}
	task, ok := rawjson.Get(resp.Result, "task")
	if !ok {
		return
	}
	id, ok := rawjson.GetString(task, "taskId")
	if !ok {
		return
	}
	nt, err := rawjson.SetString(task, "taskId", tc.token(id))
	if err != nil {
		return
	}
	res, err := rawjson.Set(resp.Result, "task", nt)
	if err != nil {
		return
	}
	resp.Result = res
	if tc.reserved {
		tc.t.record(taskKey{tc.upstream, id}, &taskEntry{owner: tc.owner, stateful: tc.stateful, expires: tc.t.now().Add(ttlOf(task))})
	}
}

// translate makes what the upstream sends during a call name its tasks by
// downstream ids: notifications/tasks/status's taskId and every
// related-task _meta (a request's answer gets the upstream's id back).
// Whatever arrives on a call's stream is its caller's.
func (tc *taskCall) translate(opts *client.CallOptions) {
	opts.Expand() // (only calls that may create a task come here)
	if n := opts.Notify; n != nil {
		opts.Notify = func(method string, params json.RawMessage) {
			n(method, tc.outgoing(method, params))
		}
	}
	if p := opts.Progress; p != nil {
		opts.Progress = func(params json.RawMessage) { p(tc.outgoing("", params)) }
	}
	if r := opts.Request; r != nil {
		opts.Request = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
			res, err := r(ctx, method, tc.outgoing("", params))
			if err == nil {
				res = tc.incoming(res)
			}
			return res, err
		}
	}
}

// outgoing translates the upstream's task ids in a message's params.
func (tc *taskCall) outgoing(method string, params json.RawMessage) json.RawMessage {
	if method == mcp.NotificationTasksStatus {
		if id, ok := rawjson.GetString(params, "taskId"); ok {
			if p, err := rawjson.SetString(params, "taskId", tc.token(id)); err == nil {
				params = p
			}
		}
	}
	return relatedTask(params, tc.token)
}

// incoming puts the upstream's id back in a client's answer's related-task.
func (tc *taskCall) incoming(res json.RawMessage) json.RawMessage {
	return relatedTask(res, func(token string) string {
		if c, ok := tc.t.open(token); ok && c.Upstream == tc.upstream && c.ownedBy(tc.owner) {
			return c.ID
		}
		return token
	})
}

// relatedTask maps the task id of obj's _meta related-task with f.
func relatedTask(obj json.RawMessage, f func(string) string) json.RawMessage {
	meta, ok := rawjson.Get(obj, "_meta")
	if !ok {
		return obj
	}
	rel, ok := rawjson.Get(meta, mcp.MetaRelatedTask)
	if !ok {
		return obj
	}
	id, ok := rawjson.GetString(rel, "taskId")
	if !ok {
		return obj
	}
	rel, err := rawjson.SetString(rel, "taskId", f(id))
	if err == nil {
		meta, err = rawjson.Set(meta, mcp.MetaRelatedTask, rel)
	}
	if err == nil {
		if out, err := rawjson.Set(obj, "_meta", meta); err == nil {
			return out
		}
	}
	return obj
}

// forwardTask serves tasks/get, tasks/result, tasks/cancel and
// tasks/update: the token names the upstream and its task, and only the
// caller it was handed to may use it; the answer names the task by the
// token again.
func (v *View) forwardTask(ctx context.Context, method string, params json.RawMessage, opts client.CallOptions) (*jsonrpc.Message, *jsonrpc.Error) {
	legacy := !opts.PassInputRequired
	switch {
	case !legacy && method == mcp.MethodTasksResult:
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q does not exist in protocol revision %s: the tasks extension inlines the result in tasks/get", method, mcp.Version20260728)
	case legacy && method == mcp.MethodTasksUpdate:
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method %q is the %s tasks extension's; in earlier revisions a task's input requests come on its tasks/result stream", method, mcp.Version20260728)
	case !legacy && !declaresTasksExtension(ctx):
		return nil, missingTasksExtension(method)
	}
	token, err := rawjson.GetPath(params, []string{"taskId"})
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: params.taskId must be a string", method)
	}
	t := v.tasks
	owner := taskOwnerFrom(ctx)
	c, ok := t.open(token)
	u := v.ups[c.Upstream]
	if !ok || u == nil || !c.ownedBy(owner) {
		t.m.TaskNotFound()
		return nil, taskNotFound(token)
	}
	form := formExtension
	if legacy {
		form = formUtility
	}
	if c.Form != form {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "task %q was created through the tasks of another protocol revision (%s); use it from a client of that revision", token, c.Form)
	}
	if params, err = rawjson.SetString(params, "taskId", c.ID); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: %v", method, err)
	}
	if !u.Enter() {
		if gone := callerGone(ctx, c.Upstream); gone != nil { // errors.go
			return nil, gone
		}
		u.Metrics().Unavailable()
		return nil, &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: fmt.Sprintf("upstream %q was replaced or removed by a config reload; its tasks are gone with it", c.Upstream)}
	}
	defer u.Exit()
	// The connection the task was created on: the one its creating call took.
	cl, cerr := u.ClientFor(host.CallOnly(ctx, method), legacy)
	if cerr != nil {
		return nil, unavailableError(ctx, u.Upstream, c.Upstream, method, cerr) // errors.go
	}
	copts := u.CallOptions(opts)
	if method != mcp.MethodTasksResult {
		// Only tasks/result carries a task's requests; the others answer at
		// once, and must not make a shared stdio upstream's requests look
		// ambiguous while they are in flight (client.Client's owner rule).
		copts.Expand()
		copts.Request, copts.Notify = nil, nil
	}
	tc := &taskCall{t: t, upstream: c.Upstream, owner: owner, form: c.Form, stateful: u.Config().Stateful}
	tc.translate(&copts)
	start := u.Metrics().CallStarted()
	resp, callErr := cl.Call(ctx, method, params, copts)
	u.Metrics().CallDone(method, start, callReason(resp, callErr))
	if callErr != nil {
		if gone := callerGone(ctx, c.Upstream); gone != nil {
			return nil, gone
		}
		return nil, callError(ctx, u.Upstream, method, callErr)
	}
	if resp.Error != nil {
		// The upstream's own words, about the id the caller used.
		resp.Error.Message = strings.ReplaceAll(resp.Error.Message, c.ID, token)
		return resp, nil
	}
	// Only an answer about the task asked for is mapped back: one naming
	// another task (an upstream that read another member for taskId, or
	// that mixed tasks up) would hand the caller a task that is not its
	// own, under its raw upstream id.
	if id, ok := rawjson.GetString(resp.Result, "taskId"); ok {
		if id != c.ID {
			return nil, otherTask(u, method, token)
		}
		if res, err := rawjson.SetString(resp.Result, "taskId", token); err == nil {
			resp.Result = res
		}
	}
	other := false
	resp.Result = relatedTask(resp.Result, func(id string) string {
		if id == c.ID {
			return token
		}
		other = true
		return id
	})
	if other {
		return nil, otherTask(u, method, token)
	}
	return resp, nil
}

// otherTask is the error for an upstream's answer about a task other than
// the one asked for; the answer is dropped and the reason logged.
func otherTask(u *upstreamState, method, token string) *jsonrpc.Error {
	u.Logger().Warn("upstream answered about another task than the one asked for; answer dropped", zap.String("method", method))
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: the upstream's answer to %s named another task than %q; it was not passed on", method, token)
}

// ListTasks answers tasks/list (2025-11-25) for a route: the route's
// upstreams that list tasks, in name order, each one's tasks that the
// caller created through this gateway (replica), named by their tokens.
// Pages hold up to taskListPage tasks; the cursor is composite like the
// catalog's.
func (v *View) ListTasks(ctx context.Context, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	kind := ListKind{Method: mcp.MethodTasksList, Key: "tasks", Field: "taskId", Capability: "tasks"}
	start, upCursor := 0, ""
	if s, ok := rawjson.GetString(params, "cursor"); ok {
		c, err := decodeCursor(kind, s)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err)
		}
		if start = slices.Index(v.names, c.Upstream); start < 0 {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid cursor: upstream %q is no longer on this route; list again without a cursor", c.Upstream)
		}
		upCursor = c.Cursor
	}
	t := v.tasks
	owner := taskOwnerFrom(ctx)
	var items [][]byte
	next := ""
	calls := 0
	for i := start; i < len(v.names) && next == ""; i, upCursor = i+1, "" {
		name := v.names[i]
		u := v.ups[name]
		c, err := u.ClientFor(host.CallOnly(ctx, mcp.MethodTasksList), true)
		if err != nil || !listsTasks(c) {
			continue
		}
		for {
			if calls == taskListCalls || len(items) >= taskListPage {
				next = encodeCursor(cursor{Kind: kind.Key, Upstream: name, Cursor: upCursor})
				break
			}
			calls++
			p := json.RawMessage(`{}`)
			if upCursor != "" {
				p, _ = rawjson.SetString(p, "cursor", upCursor)
			}
			resp, err := c.Call(ctx, mcp.MethodTasksList, p, client.CallOptions{})
			if err != nil || resp.Error != nil {
				if err == nil {
					err = resp.Error
				}
				u.Logger().Warn("tasks/list failed; its tasks are left out of this page", zap.Error(err))
				break
			}
			arr, _ := rawjson.Get(resp.Result, "tasks")
			list, _ := rawjson.Elements(arr)
			for _, it := range list {
				id, ok := rawjson.GetString(it, "taskId")
				if !ok {
					continue
				}
				e := t.entry(taskKey{name, id})
				if e == nil || e.owner.Route != owner.Route || e.owner.Principal != owner.Principal || (sessionBound(e.owner, e.stateful) && e.owner.Session != owner.Session) {
					continue // not the caller's, or not seen created here
				}
				tok := t.seal(claims(name, id, formUtility, e.owner, e.stateful))
				if nit, err := rawjson.SetString(it, "taskId", tok); err == nil {
					items = append(items, nit)
				}
			}
			upCursor, _ = rawjson.GetString(resp.Result, "nextCursor")
			if upCursor == "" {
				break
			}
		}
	}
	out := []byte(`{"tasks":`)
	out = rawjson.AppendArray(out, items)
	if next != "" {
		out = append(out, `,"nextCursor":`...)
		b, _ := json.Marshal(next)
		out = append(out, b...)
	}
	return append(out, '}'), nil
}

// listsTasks reports whether an upstream connection offers tasks/list.
func listsTasks(c *client.Client) bool {
	caps, ok := rawjson.Get(c.InitializeResult().Capabilities, "tasks")
	if !ok {
		return false
	}
	_, ok = rawjson.Get(caps, "list")
	return ok
}

// TaskNotification translates a notifications/tasks/status an upstream sent
// outside any call (2025-11-25): it goes to the session that created the
// task, if the gateway saw it created, with the task named by its token.
// session, when set, is the stateful upstream connection's session, which
// must be the task's.
func TaskNotification(h *host.Host, upstream, session string, params json.RawMessage) (string, json.RawMessage, bool) {
	id, ok := rawjson.GetString(params, "taskId")
	if !ok {
		return "", nil, false
	}
	t := tasksOf(h)
	e := t.entry(taskKey{upstream, id})
	if e == nil || e.owner.Session == "" || (session != "" && session != e.owner.Session) {
		return "", nil, false
	}
	tc := &taskCall{t: t, upstream: upstream, owner: e.owner, form: formUtility, stateful: e.stateful}
	return e.owner.Session, tc.outgoing(mcp.NotificationTasksStatus, params), true
}

// WithTaskCapabilities adds to caps (a capabilities object the gateway
// offers on this route) the tasks its upstreams that shown lets through
// offer: for a 2026-07-28
// client the extension, when an upstream connected at 2026-07-28 declares
// it; for older clients the tasks capability of the upstreams' connections
// of an older revision (the shared one, or the second one a dual-stack
// upstream makes for older callers once it exists), the union of what they
// declare: list, cancel, requests.tools.call.
func (v *View) WithTaskCapabilities(caps json.RawMessage, stateless bool, shown Shown) json.RawMessage {
	var extension bool
	var list, cancel, toolsCall bool
	for _, name := range v.names {
		if !shown.has(name) {
			continue
		}
		u := v.ups[name]
		c := u.SharedClient()
		if c == nil {
			continue
		}
		if stateless {
			if exts, ok := rawjson.Get(c.InitializeResult().Capabilities, "extensions"); ok && c.Modern() {
				if _, ok := rawjson.Get(exts, mcp.ExtensionTasks); ok {
					extension = true
				}
			}
			continue
		}
		if c.Modern() {
			c = u.AltClient()
			if c == nil {
				continue
			}
		}
		tc, ok := rawjson.Get(c.InitializeResult().Capabilities, "tasks")
		if !ok {
			continue
		}
		_, l := rawjson.Get(tc, "list")
		_, cn := rawjson.Get(tc, "cancel")
		reqs, _ := rawjson.Get(tc, "requests")
		tools, _ := rawjson.Get(reqs, "tools")
		_, call := rawjson.Get(tools, "call")
		list, cancel, toolsCall = list || l, cancel || cn, toolsCall || call
	}
	switch {
	case extension:
		exts, ok := rawjson.Get(caps, "extensions")
		if !ok {
			exts = json.RawMessage(`{}`)
		}
		if exts, err := rawjson.Set(exts, mcp.ExtensionTasks, json.RawMessage(`{}`)); err == nil {
			if out, err := rawjson.Set(caps, "extensions", exts); err == nil {
				return out
			}
		}
	case list || cancel || toolsCall:
		obj := json.RawMessage(`{}`)
		if list {
			obj, _ = rawjson.Set(obj, "list", json.RawMessage(`{}`))
		}
		if cancel {
			obj, _ = rawjson.Set(obj, "cancel", json.RawMessage(`{}`))
		}
		if toolsCall {
			obj, _ = rawjson.Set(obj, "requests", json.RawMessage(`{"tools":{"call":{}}}`))
		}
		if out, err := rawjson.Set(caps, "tasks", obj); err == nil {
			return out
		}
	}
	return caps
}

// TaskUpstream is the upstream a task id names, for the rate limits and
// the audit of the tasks methods ("" when token is not one of this
// gateway's). It does not check who holds the token: forwardTask does,
// and a request charged to the upstream it names is charged to the
// caller's own buckets too.
func (v *View) TaskUpstream(token string) string {
	c, ok := v.tasks.open(token)
	if !ok || v.ups[c.Upstream] == nil {
		return ""
	}
	return c.Upstream
}

// taskAugmented reports whether a request's params carry task (it asks for
// a task), from what the edge read of them when there is that.
func taskAugmented(params json.RawMessage, opts *client.CallOptions) bool {
	if opts.View.Read {
		return opts.View.Task
	}
	_, augmented := rawjson.Get(params, "task")
	return augmented
}
