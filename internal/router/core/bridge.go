package core

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/limits"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/telemetry"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// Bridging a session-revision upstream to a stateless (2026-07-28) caller.
// Such an upstream asks for sampling, elicitation or roots with a
// server→client request in the middle of a call; a 2026-07-28 client can
// only be asked through an input_required result and answers by retrying
// the request. So the gateway parks the upstream call — still waiting for
// its answer — returns input_required with a requestState naming the
// parked call, and when the retry brings inputResponses it answers the
// upstream and resumes waiting. (The other direction, a stateless
// upstream's input_required answered on a session caller's stream, is
// catalog.View's, which holds the upstream connection the retries need.)
//
// Parked calls live in this replica's memory: a retry must reach the same
// replica (the requestState says so when it does not). They are bounded in
// number and time, and the requestState is authenticated, bound to the
// request it came from and short-lived, so a client can neither forge one
// nor replay another's.
const (
	bridgeStatePrefix = "mcpgw1."
	bridgeTTL         = 5 * time.Minute
	// After an input request the gateway waits bridgeGatherIdle for another
	// (at most bridgeGather in all), so that requests an upstream sends
	// together — the SDKs send an input_required map's at once — come back
	// in one input_required result. One that comes later only costs a round.
	bridgeGatherIdle = 5 * time.Millisecond
	bridgeGather     = 25 * time.Millisecond
)

// bridge holds the parked calls of one router.
type bridge struct {
	keys atomic.Pointer[[][]byte] // HMAC keys for requestState: the first signs, any verifies
	home string                   // sessions.advertise_url: where other replicas forward retries ("": none)
	m    *metrics.Metrics         // nil: none

	mu     sync.Mutex
	parked map[string]*parkedCall
	owners map[string]int // parked calls per authenticated principal (tag)
	seq    uint64
}

// newBridge makes the bridge of a router. With the replicas' shared
// session keys its requestStates can be verified by every replica (each key
// of the ring gives a bridge key, so rotation works as for session ids),
// and home names this replica in them; otherwise the key is random and
// the states are this process's alone.
func newBridge(m *metrics.Metrics, sessionKeys [][]byte, home string) *bridge {
	b := &bridge{home: home, m: m, parked: map[string]*parkedCall{}, owners: map[string]int{}}
	if len(sessionKeys) > 0 {
		b.setKeys(sessionKeys)
		return b
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	b.keys.Store(&[][]byte{key})
	b.home = ""
	return b
}

// setKeys derives the requestState keys from a session key ring
// (non-empty): one per ring key, so a rotation works as for session ids.
func (b *bridge) setKeys(sessionKeys [][]byte) {
	keys := make([][]byte, 0, len(sessionKeys))
	for _, k := range sessionKeys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte("mcpgw bridge requestState v1")) // a key of its own, not the AEAD key
		keys = append(keys, mac.Sum(nil))
	}
	b.keys.Store(&keys)
}

// parkedCall is one downstream call whose upstream request outlives the
// HTTP requests that carry it.
type parkedCall struct {
	id     string
	method string
	name   string // params.name or params.uri: the retry must match
	owner  string // principalTag of the caller: only it may resume the call
	bridge *bridge
	limits Limits // the generation's bounds on parking it (park)
	call   *Call  // what Next drives
	ctx    context.Context
	cancel context.CancelFunc
	needs  chan *inputNeed     // input requests as the upstream makes them
	failed chan *jsonrpc.Error // ends the call for the client before the upstream does

	mu      sync.Mutex
	pending map[string]*inputNeed // asked of the client, not yet answered (made by the first: most calls ask nothing)
	seq     int
	round   int        // input_required results returned so far
	driven  bool       // an HTTP request is waiting on this call now
	again   bool       // a retry left inputs unanswered: Next asks for them at once
	span    trace.Span // the request's server span (nil: tracing off; telemetry.go)
}

type inputNeed struct {
	key    string
	method string
	params json.RawMessage
	answer chan json.RawMessage // the client's result
}

// Unbridged reports whether a stateless caller's routed request, judged
// by v, can run as a plain call (Serve) rather than a bridged one: its
// upstream speaks a stateless revision, so it asks the caller nothing
// mid-call and nothing will need parking. It routes by the target v read,
// not by reading the params again; a request v found no target in (a
// task, a malformed one) is bridged, as before. (Should that connection
// be replaced by one of a session revision between this answer and the
// call — an upstream downgraded while it was reconnecting — a request it
// made mid-call would fail, naming why, rather than be bridged; its
// caller can retry.)
func (c *Core) Unbridged(ctx context.Context, v *Verdict) bool {
	if v == nil || !v.targeted || v.pinErr != nil {
		return false
	}
	return v.rte.View.AsksNothing(ctx, mcp.Kind(v.kind), v.external)
}

// StartBridged runs a stateless caller's routed request as a call that
// can outlive the HTTP request carrying it: when a session-revision
// upstream asks the client for input (sampling, elicitation, roots), Next
// parks the call and returns input_required, and a retry resumes it
// (Resume). paramHeaders are the request's Mcp-Param-* headers, passed to a
// stateless HTTP upstream. The call is driven by the caller until Release.
func (c *Core) StartBridged(sess *Session, msg *jsonrpc.Message, v *Verdict, paramHeaders http.Header) *Call {
	// The call outlives the HTTP request, but not its principal: policy
	// and audit below Handle still see who asked.
	ctx, cancel := context.WithTimeout(auth.WithPrincipal(c.ctx, auth.FromContext(sess.ctx)), bridgeTTL)
	ctx = upcall.WithHeaders(ctx, paramHeaders)
	ctx = telemetry.WithTrace(ctx, telemetry.TraceFrom(sess.ctx)) // sess.ctx is still the request's here
	name := bridgedName(msg, v)
	p := &parkedCall{
		method: msg.Method,
		name:   name,
		owner:  principalTag(sess.owner),
		bridge: c.bridge,
		limits: sess.Route().Gen.Limits,
		ctx:    ctx,
		cancel: cancel,
		needs:  make(chan *inputNeed, 8),
		failed: make(chan *jsonrpc.Error, 1),
		driven: true,
	}
	sess.ctx = ctx // the call outlives the request; the request's End still ends only the request
	call := newCall(ctx, sess)
	call.park, call.cs.park = p, p
	p.call = call
	c.run(call, msg.ID, func() *jsonrpc.Message {
		return c.StatelessResult(msg.Method, c.Handle(ctx, sess, msg, v, call.cs))
	}, cancel)
	return call
}

// Release tells a bridged call that the HTTP request driving it is done:
// until a retry resumes it, it is parked (or over).
func (call *Call) Release() {
	if p := call.park; p != nil {
		p.mu.Lock()
		p.driven = false
		p.mu.Unlock()
	}
}

// IsBridgeState reports whether a requestState is one the gateway minted
// for a parked call (else it is the upstream's, passed through).
func IsBridgeState(state string) bool { return strings.HasPrefix(state, bridgeStatePrefix) }

// Resume finds the parked call a retry's requestState names and answers
// the input requests the retry's inputResponses answer; Next then asks
// again for what is still missing, or goes on waiting for the answer.
// When another replica holds the call, home is its advertised URL (the
// retry is forwarded there). Only the principal the call was made by may
// resume it.
func (c *Core) Resume(sess *Session, msg *jsonrpc.Message) (call *Call, home string, err *jsonrpc.Error) {
	state, _ := rawjson.GetString(msg.Params, "requestState")
	p, home, err := c.bridge.resume(state, msg, principalTag(sess.owner))
	if err != nil {
		c.bridge.m.BridgeRound(metrics.BridgeRefused)
		return nil, "", err
	}
	if home != "" {
		return nil, home, nil
	}
	c.bridge.m.BridgeRound(metrics.BridgeResumed)
	p.event(telemetry.EventBridgeResumed)
	// Answer what the client answered; what it left out is asked again.
	responses, _ := rawjson.Get(msg.Params, "inputResponses")
	p.mu.Lock()
	for key, need := range p.pending {
		if res, ok := rawjson.Get(responses, key); ok {
			need.answer <- res
			delete(p.pending, key)
		}
	}
	if len(p.pending) > 0 {
		p.again = true
	}
	p.mu.Unlock()
	return p.call, "", nil
}

// takeAgain reports (once) that a retry left inputs unanswered.
func (p *parkedCall) takeAgain() bool {
	p.mu.Lock()
	again := p.again
	p.again = false
	p.mu.Unlock()
	if again {
		p.bridge.m.BridgeRound(metrics.BridgeAsked)
		p.event(telemetry.EventBridgeInputRequired) // event takes p.mu
	}
	return again
}

// gather takes the input request need and those the upstream makes at
// about the same time, parks the call and returns the input_required
// result, or the refusal when no more calls may be parked (its own or its
// principal's share: sessions.max_parked_calls[_per_principal]).
func (p *parkedCall) gather(need *inputNeed) Outcome {
	p.mu.Lock()
	if p.pending == nil {
		p.pending = map[string]*inputNeed{}
	}
	p.pending[need.key] = need
	p.mu.Unlock()
	limit := time.After(bridgeGather)
	idle := time.NewTimer(bridgeGatherIdle)
	defer idle.Stop()
collect:
	for {
		select {
		case n := <-p.needs:
			p.mu.Lock()
			p.pending[n.key] = n
			p.mu.Unlock()
			idle.Reset(bridgeGatherIdle)
		case <-idle.C:
			break collect
		case <-limit:
			break collect
		}
	}
	if lr := p.bridge.park(p, p.limits); lr != nil {
		p.bridge.m.BridgeRound(metrics.BridgeFull)
		p.cancel()
		return Outcome{Err: lr.JSONRPC(), Refusal: lr}
	}
	p.bridge.m.BridgeRound(metrics.BridgeAsked)
	p.event(telemetry.EventBridgeInputRequired)
	return Outcome{InputRequired: p.inputRequired()}
}

// inputRequired is the input_required result naming the parked call's
// outstanding input requests, with a fresh requestState.
func (p *parkedCall) inputRequired() json.RawMessage {
	p.mu.Lock()
	reqs := map[string]any{}
	for key, n := range p.pending {
		reqs[key] = map[string]json.RawMessage{"method": mustJSON(n.method), "params": n.params}
	}
	p.mu.Unlock()
	b, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": reqs,
		"requestState":  p.bridge.state(p),
	})
	return b
}

// ask is called (on the upstream's behalf) when the upstream needs input:
// it queues the request for the client and waits for the answer.
func (p *parkedCall) ask(upstreamCtx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	p.mu.Lock()
	p.seq++
	need := &inputNeed{key: "mcpgw-" + strconv.Itoa(p.seq), method: method, params: params, answer: make(chan json.RawMessage, 1)}
	p.mu.Unlock()
	gone := jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: the client did not answer %s in time", method)
	select {
	case p.needs <- need:
	case <-p.ctx.Done():
		return nil, gone
	case <-upstreamCtx.Done():
		return nil, gone
	}
	select {
	case res := <-need.answer:
		return res, nil
	case <-p.ctx.Done():
		return nil, gone
	case <-upstreamCtx.Done():
		return nil, gone
	}
}

// waiting reports whether the call is parked: its client was given
// input_required and no retry is being served, so the upstream handler is
// blocked in the requests the client has yet to answer.
func (p *parkedCall) waiting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.driven && len(p.pending) > 0
}

// fail ends the call for its client with err, whatever the upstream then
// answers; the first failure wins.
func (p *parkedCall) fail(err *jsonrpc.Error) {
	select {
	case p.failed <- err:
	default:
	}
}

// missingCapability is the 2026-07-28 error for a request that needs a
// client capability the caller did not declare; data.requiredCapabilities
// is a ClientCapabilities object naming it ("elicitation.url" nests).
func missingCapability(capability, method string) *jsonrpc.Error {
	required := json.RawMessage(`{}`)
	path := strings.Split(capability, ".")
	for i := len(path) - 1; i >= 0; i-- {
		required, _ = json.Marshal(map[string]json.RawMessage{path[i]: required})
	}
	data, _ := json.Marshal(map[string]json.RawMessage{"requiredCapabilities": required})
	return &jsonrpc.Error{
		Code:    mcp.CodeMissingRequiredClientCapability,
		Message: fmt.Sprintf("the upstream needs the client capability %q (it sent %s); declare it in _meta[%q] to use this", capability, method, mcp.MetaClientCapabilities),
		Data:    data,
	}
}

// bridgeState is what a requestState minted by the gateway carries.
type bridgeState struct {
	ID     string `json:"p"`
	Round  int    `json:"r"` // each round's state differs, as the spec expects
	Expiry int64  `json:"e"`
	Method string `json:"m"`
	Name   string `json:"n"`
	Owner  string `json:"u,omitempty"` // principalTag of the caller
	Home   string `json:"h,omitempty"` // the replica holding the call (sessions.advertise_url)
}

func (b *bridge) sign(payload []byte) []byte { return signWith((*b.keys.Load())[0], payload) }

func signWith(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	return m.Sum(nil)
}

// verify reports whether sig is payload's signature under one of the keys.
func (b *bridge) verify(payload, sig []byte) bool {
	for _, k := range *b.keys.Load() {
		if hmac.Equal(sig, signWith(k, payload)) {
			return true
		}
	}
	return false
}

// state mints the requestState for a parked call.
func (b *bridge) state(p *parkedCall) string {
	p.mu.Lock()
	p.round++
	round := p.round
	p.mu.Unlock()
	payload, _ := json.Marshal(bridgeState{ID: p.id, Round: round, Expiry: time.Now().Add(bridgeTTL).Unix(), Method: p.method, Name: p.name, Owner: p.owner, Home: b.home})
	enc := base64.RawURLEncoding
	return bridgeStatePrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(b.sign(payload))
}

// park registers p for resumption, within sessions.max_parked_calls and,
// for an authenticated caller, sessions.max_parked_calls_per_principal:
// each parked call holds an upstream request for up to bridgeTTL, so one
// client must not take them all.
func (b *bridge) park(p *parkedCall, lim Limits) *limits.Refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.id != "" {
		return nil // already parked (a further round)
	}
	var refused *limits.Refusal
	switch {
	case len(b.parked) >= lim.MaxParked:
		refused = &limits.Refusal{Bound: "sessions.max_parked_calls", Max: lim.MaxParked, What: "calls waiting for client input on this gateway replica"}
	case p.owner != "" && b.owners[p.owner] >= lim.MaxParkedPerPrincipal:
		refused = &limits.Refusal{Bound: "sessions.max_parked_calls_per_principal", Max: lim.MaxParkedPerPrincipal, What: "calls waiting for this principal's input", PerPrincipal: true}
	}
	if refused != nil {
		b.m.LimitRefused(refused.Bound)
		return refused
	}
	b.seq++
	p.id = strconv.FormatUint(b.seq, 36) + "-" + rand.Text()
	b.parked[p.id] = p
	if p.owner != "" {
		b.owners[p.owner]++
	}
	b.m.BridgeParked(+1)
	// Forget it when it ends, whatever ends it.
	context.AfterFunc(p.ctx, func() { b.forget(p) })
	return nil
}

// closeAll cancels every parked call (router shutdown).
func (b *bridge) closeAll() {
	b.mu.Lock()
	parked := make([]*parkedCall, 0, len(b.parked))
	for _, p := range b.parked {
		parked = append(parked, p)
	}
	b.mu.Unlock()
	for _, p := range parked {
		p.cancel()
	}
}

func (b *bridge) forget(p *parkedCall) {
	b.mu.Lock()
	if p.id != "" && b.parked[p.id] == p {
		delete(b.parked, p.id)
		b.m.BridgeParked(-1)
		if p.owner != "" {
			if b.owners[p.owner]--; b.owners[p.owner] <= 0 {
				delete(b.owners, p.owner)
			}
		}
	}
	b.mu.Unlock()
}

// resume verifies a requestState and returns its parked call, or, when
// another replica holds it, that replica's advertised URL.
// Only the principal the call was made by may resume it (owner).
func (b *bridge) resume(state string, msg *jsonrpc.Message, owner string) (*parkedCall, string, *jsonrpc.Error) {
	bad := func(why string) *jsonrpc.Error {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "invalid requestState: %s; send the original request again without requestState", why)
	}
	body := strings.TrimPrefix(state, bridgeStatePrefix)
	p64, s64, ok := strings.Cut(body, ".")
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p64)
	sig, err2 := enc.DecodeString(s64)
	if !ok || err1 != nil || err2 != nil || !b.verify(payload, sig) {
		return nil, "", bad("not issued by this gateway or altered")
	}
	var st bridgeState
	if json.Unmarshal(payload, &st) != nil {
		return nil, "", bad("unreadable")
	}
	if time.Now().Unix() > st.Expiry {
		return nil, "", bad("expired")
	}
	name, _ := rawjson.GetString(msg.Params, mcp.NameHeaderField(msg.Method))
	if st.Method != msg.Method || st.Name != name {
		return nil, "", bad(fmt.Sprintf("it belongs to %s %q, not this request", st.Method, st.Name))
	}
	if st.Owner != owner {
		return nil, "", bad("it was issued to another principal")
	}
	if st.Home != "" && st.Home != b.home {
		return nil, st.Home, nil
	}
	b.mu.Lock()
	p := b.parked[st.ID]
	b.mu.Unlock()
	if p == nil || p.owner != owner {
		return nil, "", bad("the waiting call ended, or it waits on another gateway replica")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.driven {
		return nil, "", bad("it is already being retried")
	}
	p.driven = true // released by Release
	return p, "", nil
}

// principalTag is a short, non-reversible tag of a principal key, for
// state handed to clients (bridge requestState).
func principalTag(key string) string {
	if key == "" {
		return ""
	}
	h := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(h[:12])
}

// bridgedName is the name a bridged call is known by (its Mcp-Name field),
// from the verdict's reading of the params when it has one.
func bridgedName(msg *jsonrpc.Message, v *Verdict) string {
	field := mcp.NameHeaderField(msg.Method)
	if p := v.Params(); p != nil && p.HasTarget && len(p.Target.Path) == 1 && p.Target.Path[0] == field {
		return p.Name
	}
	name, _ := rawjson.GetString(msg.Params, field)
	return name
}
