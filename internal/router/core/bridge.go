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
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/client"
	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/metrics"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/router/edge"
	"github.com/mcpgw/mcpgw/internal/sse"
	"github.com/mcpgw/mcpgw/internal/telemetry"
)

// Bridging a legacy upstream to a 2026-07-28 client. A legacy upstream asks
// for sampling, elicitation or roots with a server→client request in the
// middle of a call; a 2026-07-28 client can only be asked through an
// input_required result and answers by retrying the request. So the gateway
// parks the upstream call — still waiting for its answer — returns
// input_required with a requestState naming the parked call, and when the
// retry brings inputResponses it answers the upstream and resumes waiting.
//
// Parked calls live in this replica's memory: a retry must reach the same
// replica (the requestState says so when it does not). They are bounded in
// number and time, and the requestState is authenticated, bound to the
// request it came from and short-lived, so a client can neither forge one
// nor replay another's.
const (
	bridgeStatePrefix = "mcpgw1."
	bridgeTTL         = 5 * time.Minute
	maxParked         = 256
	// After an input request the gateway waits bridgeGatherIdle for another
	// (at most bridgeGather in all), so that requests an upstream sends
	// together — the SDKs send an input_required map's at once — come back
	// in one input_required result. One that comes later only costs a round.
	bridgeGatherIdle = 5 * time.Millisecond
	bridgeGather     = 25 * time.Millisecond
)

// bridge holds the parked calls of one router.
type bridge struct {
	keys [][]byte         // HMAC keys for requestState: the first signs, any verifies
	home string           // sessions.advertise_url: where other replicas forward retries ("": none)
	m    *metrics.Metrics // nil: none

	mu     sync.Mutex
	parked map[string]*parkedCall
	seq    uint64
}

// newBridge makes the bridge of a router. With the replicas' shared
// session keys its requestStates can be verified by every replica (each key
// of the ring gives a bridge key, so rotation works as for session ids),
// and home names this replica in them; otherwise the key is random and
// the states are this process's alone.
func newBridge(m *metrics.Metrics, sessionKeys [][]byte, home string) *bridge {
	b := &bridge{home: home, m: m, parked: map[string]*parkedCall{}}
	for _, k := range sessionKeys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte("mcpgw bridge requestState v1")) // a key of its own, not the AEAD key
		b.keys = append(b.keys, mac.Sum(nil))
	}
	if len(b.keys) == 0 {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		b.keys = [][]byte{key}
		b.home = ""
	}
	return b
}

// parkedCall is one downstream call whose upstream request outlives the
// HTTP requests that carry it.
type parkedCall struct {
	id     string
	method string
	name   string // params.name or params.uri: the retry must match
	owner  string // principalTag of the caller: only it may resume the call
	ctx    context.Context
	cancel context.CancelFunc
	cs     *CallStream
	done   chan *jsonrpc.Message // the final response
	needs  chan *inputNeed       // input requests as the upstream makes them
	failed chan *jsonrpc.Error   // ends the call for the client before the upstream does

	mu      sync.Mutex
	pending map[string]*inputNeed // asked of the client, not yet answered
	seq     int
	round   int        // input_required results returned so far
	driven  bool       // an HTTP request is waiting on this call now
	span    trace.Span // the request's server span (nil: tracing off; telemetry.go)
}

type inputNeed struct {
	key    string
	method string
	params json.RawMessage
	answer chan json.RawMessage // the client's result
}

// newParked starts running msg for a stateless session on a goroutine owned
// by the router; the caller waits on it with drive.
func (c *Core) newParked(sess *Session, msg *jsonrpc.Message) *parkedCall {
	// The call outlives the HTTP request, but not its principal: policy
	// and audit below dispatch still see who asked.
	ctx, cancel := context.WithTimeout(auth.WithPrincipal(context.Background(), auth.FromContext(sess.ctx)), bridgeTTL)
	ctx = client.WithHeaders(ctx, sess.paramHeaders)
	ctx = client.WithTrace(ctx, client.TraceFrom(sess.ctx)) // sess.ctx is still the request's here
	field := mcp.NameHeaderField(msg.Method)
	name, _ := rawjson.GetString(msg.Params, field)
	p := &parkedCall{
		method:  msg.Method,
		name:    name,
		owner:   principalTag(sess.owner),
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan *jsonrpc.Message, 1),
		needs:   make(chan *inputNeed, 8),
		failed:  make(chan *jsonrpc.Error, 1),
		pending: map[string]*inputNeed{},
	}
	sess.ctx = ctx // the call outlives the request; the request's End still ends only the request
	p.cs = NewCallStream(ctx, sess)
	p.cs.park = p
	if !c.Go(func() {
		defer cancel()
		p.done <- c.StatelessResult(msg.Method, c.Handle(ctx, sess, msg, p.cs))
	}) {
		cancel()
		p.done <- jsonrpc.NewError(msg.ID, &jsonrpc.Error{Code: mcp.CodeUpstreamUnavailable, Message: "mcpgw is shutting down; retry against another replica"})
	}
	return p
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

// ServeBridged answers a stateless routed request: a fresh one, or the retry
// of one that returned input_required (its requestState is ours).
func (c *Core) ServeBridged(w http.ResponseWriter, r *http.Request, sess *Session, msg *jsonrpc.Message) {
	state, _ := rawjson.GetString(msg.Params, "requestState")
	if !strings.HasPrefix(state, bridgeStatePrefix) {
		c.drive(w, r, c.newParked(sess, msg), msg.ID)
		return
	}
	p, home, err := c.bridge.resume(state, msg, principalTag(sess.owner))
	if err == nil && home != "" {
		err = c.forwardRetry(w, r, home, msg)
		if err == nil {
			return
		}
	}
	if err != nil {
		c.bridge.m.BridgeRound(metrics.BridgeRefused)
		edge.WriteJSON(w, StatelessStatus(err.Code), jsonrpc.NewError(msg.ID, err))
		return
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
	still := len(p.pending) > 0
	if still {
		p.driven = false
	}
	p.mu.Unlock()
	if still {
		c.bridge.m.BridgeRound(metrics.BridgeAsked)
		p.event(telemetry.EventBridgeInputRequired)
		c.inputRequired(w, p, msg.ID)
		return
	}
	c.drive(w, r, p, msg.ID)
}

// drive waits on a running call for this HTTP request: its final response,
// or the input requests it needs (then it is parked and input_required is
// returned). Progress and log messages stream meanwhile when accepted.
func (c *Core) drive(w http.ResponseWriter, r *http.Request, p *parkedCall, id jsonrpc.ID) {
	p.mu.Lock()
	p.driven = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.driven = false
		p.mu.Unlock()
	}()
	var sw *sse.Writer
	streaming := edge.Accepts(r, mcp.ContentTypeEventStream)
	start := time.After(50 * time.Millisecond) // errors with an HTTP status go out before any stream
	var early [][]byte
	for {
		select {
		case <-r.Context().Done():
			// A closed stream cancels the request (2026-07-28 transport).
			p.cancel()
			c.bridge.forget(p)
			return
		case <-start:
			if streaming && sw == nil {
				sw = sse.NewWriter(w)
				for _, b := range early {
					_ = sw.Write(sse.Event{Data: b})
				}
				early = nil
			}
		case b := <-p.cs.events:
			switch {
			case sw != nil:
				_ = sw.Write(sse.Event{Data: b})
			case streaming:
				early = append(early, b)
			}
		case err := <-p.failed:
			c.bridge.m.BridgeRound(metrics.BridgeMissingCapability)
			p.cancel()
			c.bridge.forget(p)
			c.finish(w, sw, jsonrpc.NewError(id, err))
			return
		case resp := <-p.done:
			c.bridge.forget(p)
			select {
			case err := <-p.failed: // the upstream's answer to a refused request may come first
				c.finish(w, sw, jsonrpc.NewError(id, err))
				return
			default:
			}
			resp.ID = id
			if sw == nil {
				status := http.StatusOK
				if resp.Error != nil {
					status = StatelessStatus(resp.Error.Code)
				}
				if streaming && len(early) > 0 && resp.Error == nil {
					sw = sse.NewWriter(w)
					for _, b := range early {
						_ = sw.Write(sse.Event{Data: b})
					}
				} else {
					edge.WriteJSON(w, status, resp)
					return
				}
			}
			for len(p.cs.events) > 0 {
				_ = sw.Write(sse.Event{Data: <-p.cs.events})
			}
			if b, err := jsonrpc.Encode(resp); err == nil {
				_ = sw.Write(sse.Event{Data: b})
			}
			return
		case need := <-p.needs:
			p.mu.Lock()
			p.pending[need.key] = need
			p.mu.Unlock()
			// Gather what the upstream asks at about the same time.
			limit := time.After(bridgeGather)
			idle := time.NewTimer(bridgeGatherIdle)
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
			idle.Stop()
			if err := c.bridge.park(p); err != nil {
				c.bridge.m.BridgeRound(metrics.BridgeFull)
				p.cancel()
				c.finish(w, sw, jsonrpc.NewError(id, err))
				return
			}
			c.bridge.m.BridgeRound(metrics.BridgeAsked)
			p.event(telemetry.EventBridgeInputRequired)
			if sw != nil {
				b, _ := jsonrpc.Encode(jsonrpc.NewResult(id, c.inputRequiredResult(p)))
				_ = sw.Write(sse.Event{Data: b})
				return
			}
			c.inputRequired(w, p, id)
			return
		}
	}
}

// finish writes a final error: on the stream when one is open, else as the
// HTTP response with the status its code calls for.
func (c *Core) finish(w http.ResponseWriter, sw *sse.Writer, e *jsonrpc.Message) {
	if sw != nil {
		if b, err := jsonrpc.Encode(e); err == nil {
			_ = sw.Write(sse.Event{Data: b})
		}
		return
	}
	edge.WriteJSON(w, StatelessStatus(e.Error.Code), e)
}

// inputRequired answers with the parked call's outstanding input requests.
func (c *Core) inputRequired(w http.ResponseWriter, p *parkedCall, id jsonrpc.ID) {
	edge.WriteJSON(w, http.StatusOK, jsonrpc.NewResult(id, c.inputRequiredResult(p)))
}

func (c *Core) inputRequiredResult(p *parkedCall) json.RawMessage {
	p.mu.Lock()
	reqs := map[string]any{}
	for key, n := range p.pending {
		reqs[key] = map[string]json.RawMessage{"method": mustJSON(n.method), "params": n.params}
	}
	p.mu.Unlock()
	b, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": reqs,
		"requestState":  c.bridge.state(p),
	})
	return b
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

func (b *bridge) sign(payload []byte) []byte { return signWith(b.keys[0], payload) }

func signWith(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	return m.Sum(nil)
}

// verify reports whether sig is payload's signature under one of the keys.
func (b *bridge) verify(payload, sig []byte) bool {
	for _, k := range b.keys {
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

// park registers p for resumption.
func (b *bridge) park(p *parkedCall) *jsonrpc.Error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.id != "" {
		return nil // already parked (a further round)
	}
	if len(b.parked) >= maxParked {
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw: too many calls are waiting for client input (%d); retry later", maxParked)
	}
	b.seq++
	p.id = strconv.FormatUint(b.seq, 36) + "-" + rand.Text()
	b.parked[p.id] = p
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
	p.driven = true // released by drive, or below when input is still missing
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
