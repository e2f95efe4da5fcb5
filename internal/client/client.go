// Package client is mcpgw's MCP client for one upstream server: the
// transports (stdio child, Streamable HTTP, legacy HTTP+SSE), the initialize
// handshake and version negotiation, and request/response matching with
// per-request timeouts, cancellation and progress-token mapping.
//
// Payloads stay raw JSON: the client rewrites only request ids and progress
// tokens, which it owns on the upstream side.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mcpgw/mcpgw/internal/jsonrpc"
	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/rawjson"
	"github.com/mcpgw/mcpgw/internal/telemetry"
	"github.com/mcpgw/mcpgw/internal/upcall"
)

// DeliverFunc receives one message from the upstream. related is the id of
// the client request whose response stream carried it (Streamable HTTP), or
// nil when the transport cannot tell (stdio, standalone streams). msg is
// handed over: the transport never uses or changes it again, so the
// message parsed from it keeps its bytes rather than a copy. answered
// reports whether msg was the response to related.
type DeliverFunc func(msg []byte, related jsonrpc.ID) (answered bool)

// Transport moves JSON-RPC messages to and from one upstream. Incoming
// messages are handed to the deliver function given to Start; a transport
// calls it from its own goroutines and must stop calling it once Close returns.
type Transport interface {
	// Start connects. deliver receives every message the upstream sends.
	Start(ctx context.Context, deliver DeliverFunc) error
	// Send writes one message. For HTTP transports an error may carry an
	// HTTP status; the message was not accepted.
	Send(ctx context.Context, msg []byte) error
	// Done is closed when the transport can no longer carry messages.
	Done() <-chan struct{}
	// Err says why Done was closed.
	Err() error
	// Close releases everything the transport owns (child process, streams).
	Close() error
}

// What the client needs of a transport beyond Transport, each a small
// interface the transports that can do it declare: the client asks for the
// capability, never for a concrete transport type, so that a transport is
// known only by what it does.

// sessionCarrier is a transport the upstream keeps a session on by an id
// it gives (Streamable HTTP's Mcp-Session-Id).
type sessionCarrier interface {
	// session is the upstream's id, "" before it gave one (or when it
	// keeps no session).
	session() string
	// adoptSession takes id, of an upstream session initialized
	// elsewhere, as this connection's.
	adoptSession(id string)
	// detach makes Close leave the upstream session alive (no DELETE).
	detach()
}

// callStreamer is a transport that answers each request on a stream of
// its own (the Streamable HTTP POST's response stream): every message the
// upstream sends about a call comes on that call's stream, and over a
// stateless revision closing the stream is the call's cancellation.
type callStreamer interface{ callStreams() }

// Child is a transport that runs the upstream as a local child process
// (stdio): its messages go over pipes, and its stderr is the server's own.
type Child interface {
	// PID is the child's process id (0 before Start).
	PID() int
}

// The capabilities each transport declares, checked when compiling: a
// method renamed on one side would otherwise take a capability away
// without a word.
var (
	_ sessionCarrier = (*Streamable)(nil)
	_ callStreamer   = (*Streamable)(nil)
	_ streamOpener   = (*Streamable)(nil)
	_ versionSetter  = (*Streamable)(nil)
	_ knownSender    = (*Streamable)(nil)
	_ Child          = (*Stdio)(nil)
	_ prober         = (*Stdio)(nil)
)

// versionSetter is implemented by transports that must repeat the
// negotiated version (the Streamable HTTP MCP-Protocol-Version header).
type versionSetter interface{ setProtocolVersion(mcp.Revision) }

// streamOpener is implemented by transports with a standalone stream for
// server-initiated messages (the legacy Streamable HTTP GET stream).
type streamOpener interface{ openStream() }

// ErrClosed is returned for calls on a closed or failed client.
var ErrClosed = errors.New("connection to upstream closed")

// Options configure a Client.
type Options struct {
	// Name is the upstream's name, used in errors and logs.
	Name string
	// Logger receives the client's log lines; it is already scoped to the upstream.
	Logger *zap.Logger
	// Timeout bounds each request when the caller's context has no earlier deadline.
	Timeout time.Duration
	// TimeoutSetting is the config key of Timeout, named in the error of a
	// request that runs out of it (default "timeout").
	TimeoutSetting string
	// ClientInfo is sent in initialize.
	ClientInfo mcp.Implementation
	// Capabilities is the raw client capabilities object sent in initialize.
	Capabilities json.RawMessage
	// OnNotification receives upstream notifications that belong to no call
	// (list_changed, resource updates, log messages outside a call).
	OnNotification func(method string, params json.RawMessage)
	// Protocol selects the handshake: "" or "auto" tries 2026-07-28's
	// server/discover first and falls back to initialize; "legacy" only
	// initializes; "2026" requires server/discover.
	Protocol string
	// PreferInitialize, with Protocol auto, initializes first and probes
	// with server/discover only if initialize is refused: for an upstream
	// known to have initialized on its previous connection, whose answer
	// to the probe would be noise (a Python-SDK 1.x server writes a page of
	// validation errors on stderr).
	PreferInitialize bool
	// OnRequest answers server→client requests that belong to no call, or
	// whose call has no Request handler (ping is answered by the client).
	// It returns a result or an error; both nil means method not found.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
	// Resume, for a Streamable HTTP transport, continues an upstream
	// session another connection initialized (another gateway replica's):
	// no handshake, its Mcp-Session-Id and negotiated version are sent
	// from the first request on.
	Resume *Resumption
	// NoReinitialize makes an upstream's 404 for the session fail the call
	// (ErrSessionExpired) and the connection, instead of initializing a new
	// session: for a session several replicas share, where a silent new
	// one would split its state.
	NoReinitialize bool
	// MaxServerRequests bounds the requests the upstream sends that are
	// being answered at once on this connection, and
	// MaxServerRequestsPerCall those of one call (0: the config defaults);
	// the overflow is refused at once (serverrequests.go). Their config
	// keys, for the refusal, are ServerRequestsSetting and
	// ServerRequestsPerCallSetting.
	MaxServerRequests            int
	MaxServerRequestsPerCall     int
	ServerRequestsSetting        string
	ServerRequestsPerCallSetting string
	// OnRefused counts a refusal by the bound with config key bound (nil:
	// not counted).
	OnRefused func(bound string)
}

// Resumption is what a connection needs to continue an upstream session
// without initializing: the upstream's Mcp-Session-Id and its initialize
// answer (negotiated version, capabilities).
type Resumption struct {
	SessionID string
	Init      mcp.InitializeResult
}

// Client is one MCP client connection to an upstream.
type Client struct {
	opts Options
	t    Transport
	log  *zap.Logger

	nextID atomic.Int64

	mu       sync.Mutex
	pending  map[string]*call // by upstream request id
	progress map[string]*call // by upstream progress token
	closed   bool

	reinitMu sync.Mutex // one re-initialization at a time

	init   mcp.InitializeResult
	modern bool      // the upstream speaks a stateless revision (2026-07-28)
	subs   listening // its subscriptions/listen stream (stateless upstreams)

	bound *bound // the cause of a call's own timeout (Options.Timeout)

	serverReqs int // upstream-sent requests being answered (guarded by mu; serverrequests.go)

	ctx        context.Context // cancelled on Close: stops server→client request handlers
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	cancelling int           // notifications/cancelled on their way (guarded by mu)
	quiet      chan struct{} // closed when cancelling drops to zero, for CloseGracefully (guarded by mu)
}

// cancelGrace bounds each notifications/cancelled, and so how long
// CloseGracefully lets the ones already on their way reach the upstream:
// calls cancelled as the gateway shuts down would otherwise run on upstream
// with nobody to answer. One bound for both, so that a notification the
// send would still have waited for is not cut short by Close (a shorter
// grace lost them on a loaded machine).
const cancelGrace = 2 * time.Second

// discoverTimeout bounds the server/discover probe: a legacy stdio server
// may ignore a request before initialize, and must not eat the whole
// startup timeout.
const discoverTimeout = 5 * time.Second

type call struct {
	id    jsonrpc.ID
	token json.RawMessage // upstream progress token, nil when none
	orig  json.RawMessage // the caller's progress token
	opts  CallOptions
	done  chan *jsonrpc.Message // buffered 1
	ctx   context.Context       // the caller's: its span, if any, records the upstream's requests

	serverReqs int // its upstream-sent requests being answered (guarded by Client.mu)
}

// CallOptions are per-call settings: where the messages an upstream sends
// about this call go (upcall.CallOptions: the router makes them without
// importing the client).
type CallOptions = upcall.CallOptions

// CallHandler receives what an upstream sends during one call
// (upcall.CallHandler).
type CallHandler = upcall.CallHandler

// Connect starts the transport and runs the initialize handshake.
func Connect(ctx context.Context, t Transport, opts Options) (*Client, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Capabilities == nil {
		opts.Capabilities = json.RawMessage(`{}`)
	}
	if opts.TimeoutSetting == "" {
		opts.TimeoutSetting = "timeout"
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		opts:     opts,
		bound:    &bound{after: opts.Timeout, setting: opts.TimeoutSetting},
		t:        t,
		log:      opts.Logger,
		pending:  make(map[string]*call),
		progress: make(map[string]*call),
		ctx:      cctx,
		cancel:   cancel,
	}
	if err := t.Start(ctx, c.deliver); err != nil {
		cancel()
		_ = t.Close()
		return nil, err
	}
	c.wg.Add(1)
	go func() { // fail pending calls as soon as the transport dies
		defer c.wg.Done()
		select {
		case <-t.Done():
			c.failAll()
		case <-cctx.Done():
		}
	}()
	var err error
	if opts.Resume != nil {
		err = c.resume(*opts.Resume)
	} else {
		err = c.handshake(ctx)
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// resume adopts an upstream session initialized elsewhere.
func (c *Client) resume(r Resumption) error {
	sc, ok := c.t.(sessionCarrier)
	so, opens := c.t.(streamOpener)
	if !ok || !opens || r.SessionID == "" || !r.Init.ProtocolVersion.Initializes() {
		return errors.New("only a Streamable HTTP upstream session with an id and a legacy revision can be resumed")
	}
	if r.Init.Capabilities == nil {
		r.Init.Capabilities = json.RawMessage(`{}`)
	}
	sc.adoptSession(r.SessionID)
	c.init = r.Init
	c.setVersion(r.Init.ProtocolVersion)
	so.openStream()
	return nil
}

// SessionID is the upstream's Mcp-Session-Id of this connection ("" for
// transports without one, or before the upstream gave one).
func (c *Client) SessionID() string {
	if sc, ok := c.t.(sessionCarrier); ok {
		return sc.session()
	}
	return ""
}

// Sessionless reports whether this is an initialized Streamable HTTP
// connection the upstream gave no Mcp-Session-Id: a server that keeps no
// session (the Go SDK's Stateless mode) cannot route a client's answer
// back to a request of its own, nor tie a GET stream to this connection,
// so it sends it no requests and no updates.
func (c *Client) Sessionless() bool {
	sc, ok := c.t.(sessionCarrier)
	return ok && !c.modern && sc.session() == ""
}

// Detach closes the connection like Close but leaves the upstream session
// alive (no DELETE): other replicas may still be using it.
func (c *Client) Detach() error {
	if sc, ok := c.t.(sessionCarrier); ok {
		sc.detach()
	}
	return c.Close()
}

func (c *Client) handshake(ctx context.Context) error {
	if c.opts.PreferInitialize && c.opts.Protocol != "legacy" && c.opts.Protocol != "2026" {
		err := c.initialize(ctx)
		var refused *refusedError
		if err == nil || !errors.As(err, &refused) {
			return err
		}
		// Refused: perhaps the server now speaks only a stateless revision.
		c.log.Info("upstream refused initialize this time; probing with server/discover", zap.Error(err))
		ok, derr := c.discover(ctx)
		if ok {
			c.goListen()
			return nil
		}
		return fmt.Errorf("%w; server/discover: %v", err, derr)
	}
	if c.opts.Protocol != "legacy" {
		ok, err := c.discover(ctx)
		switch {
		case ok:
			c.goListen()
			return nil
		case c.opts.Protocol == "2026":
			if err == nil {
				err = errors.New("the upstream does not offer protocol version " + string(mcp.Version20260728))
			}
			return fmt.Errorf("server/discover: %w", err)
		case ctx.Err() != nil:
			return c.ctxErr(ctx, mcp.MethodServerDiscover)
		}
		c.log.Debug("upstream does not speak a stateless revision; initializing", zap.Error(err))
	}
	return c.initialize(ctx)
}

// discover tries the 2026-07-28 handshake. It reports false (and why) when
// the upstream answers like an older server, so the caller can initialize.
func (c *Client) discover(ctx context.Context) (bool, error) {
	c.setVersion(mcp.Version20260728)
	c.modern = true // so the probe keeps its own _meta
	params, _ := json.Marshal(map[string]any{"_meta": map[string]any{
		mcp.MetaProtocolVersion:    mcp.Version20260728,
		mcp.MetaClientCapabilities: c.opts.Capabilities,
		mcp.MetaClientInfo:         c.opts.ClientInfo,
	}})
	dctx, cancel := WithBound(ctx, discoverTimeout, "")
	defer cancel()
	if p, ok := c.t.(prober); ok {
		p.beginProbe()
		defer p.endProbe()
	}
	resp, err := c.Call(dctx, mcp.MethodServerDiscover, params, CallOptions{})
	if err == nil && retryVersion(resp.Error) {
		// The server refused the version but names 2026-07-28 among those
		// it speaks (SEP-2575: a client retries with a supported one).
		resp, err = c.Call(dctx, mcp.MethodServerDiscover, params, CallOptions{})
	}
	if err == nil && resp.Error != nil {
		err = fmt.Errorf("answered %d %s", resp.Error.Code, resp.Error.Message)
	}
	var res struct {
		SupportedVersions []mcp.Revision  `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
		ServerInfo        json.RawMessage `json:"serverInfo"`
		Instructions      string          `json:"instructions"`
		Meta              struct {
			ServerInfo json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
	}
	if err == nil {
		err = json.Unmarshal(resp.Result, &res)
	}
	if err == nil && !slices.Contains(res.SupportedVersions, mcp.Version20260728) {
		err = fmt.Errorf("supports %v", res.SupportedVersions)
	}
	if err != nil {
		c.setVersion("")
		c.modern = false
		return false, err
	}
	if res.Capabilities == nil {
		res.Capabilities = json.RawMessage(`{}`)
	}
	info := res.Meta.ServerInfo
	if info == nil {
		info = res.ServerInfo
	}
	c.init = mcp.InitializeResult{ProtocolVersion: mcp.Version20260728, Capabilities: res.Capabilities, ServerInfo: info, Instructions: res.Instructions}
	return true, nil
}

// retryVersion reports whether e is an UnsupportedProtocolVersion error
// whose data.supported lists 2026-07-28.
func retryVersion(e *jsonrpc.Error) bool {
	if e == nil || e.Code != mcp.CodeUnsupportedProtocolVersion {
		return false
	}
	var data struct {
		Supported []string `json:"supported"`
	}
	return json.Unmarshal(e.Data, &data) == nil && slices.Contains(data.Supported, string(mcp.Version20260728))
}

func (c *Client) setVersion(v mcp.Revision) {
	if vs, ok := c.t.(versionSetter); ok {
		vs.setProtocolVersion(v)
	}
}

// initialize runs the legacy handshake (2024-11-05 through 2025-11-25).
func (c *Client) initialize(ctx context.Context) error {
	params, _ := json.Marshal(struct {
		ProtocolVersion mcp.Revision       `json:"protocolVersion"`
		Capabilities    json.RawMessage    `json:"capabilities"`
		ClientInfo      mcp.Implementation `json:"clientInfo"`
	}{mcp.LatestVersion, c.opts.Capabilities, c.opts.ClientInfo})
	resp, err := c.Call(ctx, mcp.MethodInitialize, params, CallOptions{})
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if resp.Error != nil {
		return &refusedError{fmt.Sprintf("initialize refused: %d %s", resp.Error.Code, resp.Error.Message)}
	}
	var res mcp.InitializeResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return fmt.Errorf("initialize: unreadable result: %v", err)
	}
	if !res.ProtocolVersion.Initializes() {
		return &refusedError{fmt.Sprintf("initialize: upstream chose protocol version %q, which mcpgw does not speak (it speaks %v)", res.ProtocolVersion, mcp.SupportedVersions)}
	}
	if res.Capabilities == nil {
		res.Capabilities = json.RawMessage(`{}`)
	}
	if c.init.ProtocolVersion == "" {
		// First handshake only: a re-initialization after an expired session
		// keeps what callers already read (c.init is read without locks).
		c.init = res
	}
	c.setVersion(res.ProtocolVersion)
	if err := c.Notify(ctx, mcp.NotificationInitialized, nil); err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	if so, ok := c.t.(streamOpener); ok {
		so.openStream()
	}
	return nil
}

// SessionGoneError ends a shared upstream session the upstream no longer
// knows (it answered 404): its words are the gateway's, for the caller.
type SessionGoneError struct{ Upstream string }

func (e *SessionGoneError) Error() string {
	return fmt.Sprintf("%v: upstream %q no longer knows this session's upstream session (it ended or expired), so the state it kept there is gone; the next request opens a new upstream session", ErrSessionExpired, e.Upstream)
}

// Unwrap makes it an ErrSessionExpired.
func (e *SessionGoneError) Unwrap() error { return ErrSessionExpired }

// refusedError is an initialize the upstream answered but would not go
// through with (an error, or a revision mcpgw does not speak).
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// prober is a transport that wants to know when the server/discover probe
// is out (stdio: the stderr it provokes is the gateway's doing).
type prober interface {
	beginProbe()
	endProbe()
}

// reinitialize makes a new upstream session after the old one expired.
// Calls that hit the expiry together make one new session between them.
func (c *Client) reinitialize(ctx context.Context) error {
	c.reinitMu.Lock()
	defer c.reinitMu.Unlock()
	if sc, ok := c.t.(sessionCarrier); ok && sc.session() != "" {
		return nil // another call already made a new one
	}
	c.log.Info("upstream session expired; initializing a new one")
	return c.initialize(ctx)
}

// Modern reports whether the upstream speaks a stateless revision.
func (c *Client) Modern() bool { return c.modern }

// ProtocolVersion is the negotiated revision.
func (c *Client) ProtocolVersion() string { return string(c.init.ProtocolVersion) }

// InitializeResult is the upstream's initialize answer.
func (c *Client) InitializeResult() mcp.InitializeResult { return c.init }

// HasCapability reports whether the upstream's capabilities object has key.
func (c *Client) HasCapability(key string) bool {
	_, ok := rawjson.Get(c.init.Capabilities, key)
	return ok
}

// Attributes reports whether the transport tells which call each message
// the upstream sends belongs to (Streamable HTTP: the POST's response
// stream). On stdio and legacy SSE only the owner rule can, which needs a
// single interactive call in flight.
func (c *Client) Attributes() bool {
	_, ok := c.t.(callStreamer)
	return ok
}

// Done is closed when the connection has failed or was closed.
func (c *Client) Done() <-chan struct{} { return c.t.Done() }

// Err says why the connection ended.
func (c *Client) Err() error { return c.t.Err() }

// Pending is how many calls await their upstream's answer.
func (c *Client) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Close ends the connection and everything it owns.
func (c *Client) Close() error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if already {
		return nil
	}
	c.cancel()
	// Fail what is pending first: stopping a stdio child can take seconds
	// (stdin, SIGTERM and SIGKILL graces), and no answer can come anyway.
	c.failAll()
	err := c.t.Close()
	c.failAll()
	c.wg.Wait()
	return err
}

// CloseGracefully closes like Close after letting the notifications/cancelled
// already on their way reach the upstream (for up to cancelGrace): at
// shutdown the gateway cancels what is in flight and then closes its
// upstreams, which would otherwise keep running those calls with nobody to
// answer. A lost or ejected upstream is closed at once with Close.
func (c *Client) CloseGracefully() error {
	c.mu.Lock()
	var quiet chan struct{}
	if c.cancelling > 0 {
		if c.quiet == nil {
			c.quiet = make(chan struct{})
		}
		quiet = c.quiet
	}
	c.mu.Unlock()
	if quiet != nil {
		grace := time.NewTimer(cancelGrace)
		select {
		case <-quiet:
		case <-grace.C:
		}
		grace.Stop()
	}
	return c.Close()
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params json.RawMessage) error {
	return c.notify(ctx, method, params, Sent{Method: method, Params: params})
}

// notify is Notify with what the client knows of the notification.
func (c *Client) notify(ctx context.Context, method string, params json.RawMessage, facts Sent) error {
	b, err := jsonrpc.Encode(jsonrpc.NewNotification(method, params))
	if err != nil {
		return err
	}
	return c.transmit(ctx, b, facts)
}

// Call sends a request and waits for its response, which may be a JSON-RPC
// error (returned in the message, not as err). err is set only when no
// response came: the connection failed, the context ended or the timeout
// fired; in the last two cases notifications/cancelled is sent upstream.
func (c *Client) Call(ctx context.Context, method string, params json.RawMessage, opts CallOptions) (*jsonrpc.Message, error) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return c.tracedCall(ctx, method, params, opts) // span.go
	}
	return c.call(ctx, method, params, opts)
}

func (c *Client) call(ctx context.Context, method string, params json.RawMessage, opts CallOptions) (*jsonrpc.Message, error) {
	if c.opts.Timeout > 0 && !opts.Background && !sooner(ctx, c.opts.Timeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.opts.Timeout, c.bound) // WithBound, its cause made once
		defer cancel()
	}
	if c.modern && (method == mcp.MethodResourcesSubscribe || method == mcp.MethodResourcesUnsubscribe) {
		return c.subscription(ctx, method, params)
	}
	id := jsonrpc.IntID(c.nextID.Add(1))
	cl := &call{id: id, done: make(chan *jsonrpc.Message, 1), opts: opts, ctx: ctx}
	if v := &opts.View; v.Read && !c.modern && telemetry.TraceFrom(ctx).Parent == "" {
		// What the edge read of the params says what _meta holds: the hop
		// keys go and the progress token is replaced in one edit (meta.go).
		p, tok, err := viewMeta(params, v, id)
		if err != nil {
			return nil, fmt.Errorf("%s: params: %w", method, err)
		}
		params, cl.orig, cl.token = p, v.ProgressToken, tok
	} else {
		var err error
		params, err = c.hopMeta(params, opts)
		if err == nil && method != mcp.MethodInitialize && method != mcp.MethodServerDiscover {
			params = traceMeta(ctx, params)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: params: %w", method, err)
		}
		// Progress tokens are always replaced by one unique to this client, so
		// that two callers using the same token value never see each other's
		// progress; without a Progress callback the notifications are dropped.
		if tok, ok := progressToken(params); ok {
			cl.orig = tok
			cl.token = clientToken(id)
			p, err := setProgressToken(params, cl.token)
			if err != nil {
				return nil, fmt.Errorf("%s: params: %w", method, err)
			}
			params = p
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.pending[string(id)] = cl
	if cl.token != nil {
		c.progress[string(cl.token)] = cl
	}
	c.mu.Unlock()
	defer c.forget(cl)

	b, err := jsonrpc.Encode(jsonrpc.NewRequest(id, method, params))
	if err != nil {
		return nil, err
	}
	facts := requestSent(method, id, params, opts.Target)
	err = c.transmit(ctx, b, facts)
	if errors.Is(err, ErrSessionExpired) && c.opts.NoReinitialize {
		// A shared session: a new one made here would split its state
		// between replicas. The connection ends; the next one starts anew.
		gone := &SessionGoneError{Upstream: c.opts.Name}
		if f, ok := c.t.(interface{ fail(error) }); ok {
			f.fail(gone)
		}
		return nil, gone
	}
	if errors.Is(err, ErrSessionExpired) && method != mcp.MethodInitialize {
		// Not processed (the upstream did not know the session): make a new
		// session and send it once more.
		if rerr := c.reinitialize(ctx); rerr != nil {
			return nil, fmt.Errorf("%w; initializing again failed: %v", err, rerr)
		}
		trace.SpanFromContext(ctx).AddEvent(telemetry.EventResent) // nothing when untraced
		err = c.transmit(ctx, b, facts)
	}
	if err != nil {
		if ctx.Err() != nil {
			// The body may have reached the upstream before the caller gave
			// up (an HTTP upstream that sends no headers until it answers).
			c.cancelUpstream(method, id, ctx)
			return nil, c.ctxErr(ctx, method)
		}
		return nil, err
	}
	select {
	case resp := <-cl.done:
		if resp == nil {
			return nil, c.closedErr()
		}
		return resp, nil
	case <-ctx.Done():
		// The upstream may already be working on it: tell it to stop, and
		// never retry (the call may have had effects).
		c.cancelUpstream(method, id, ctx)
		return nil, c.ctxErr(ctx, method)
	}
}

// cancelUpstream tells the upstream to stop working on request id. Over
// 2026-07-28 HTTP, closing the request's stream (the caller's ctx) already is
// the cancellation; everywhere else the upstream must be told.
func (c *Client) cancelUpstream(method string, id jsonrpc.ID, ctx context.Context) {
	_, streams := c.t.(callStreamer)
	if method == mcp.MethodInitialize || (c.modern && streams) {
		return
	}
	reason := "request cancelled by the gateway"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reason = "request timed out at the gateway"
	}
	cp, _ := json.Marshal(map[string]any{"requestId": id, "reason": reason})
	// On a goroutine the client owns: a hung upstream must not hold the
	// caller, who already has its timeout error, for the notification too.
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.wg.Add(1)
		c.cancelling++
	}
	c.mu.Unlock()
	if closed {
		return
	}
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			c.cancelling--
			if c.cancelling == 0 && c.quiet != nil {
				close(c.quiet) // CloseGracefully waits for this
				c.quiet = nil
			}
			c.mu.Unlock()
		}()
		sendCtx, cancel := context.WithTimeout(c.ctx, cancelGrace)
		defer cancel()
		if err := c.notify(sendCtx, mcp.NotificationCancelled, cp, Sent{Method: mcp.NotificationCancelled, Params: cp, Cancels: string(id)}); err != nil {
			c.log.Debug("could not send notifications/cancelled", zap.Error(err))
		}
	}()
}

// TimeoutError reports a call that got no answer in time.
type TimeoutError struct {
	Method string
	// After is the bound that fired (0: a deadline of the caller's).
	After time.Duration
	// Setting is the config key of that bound (e.g.
	// "upstreams.fs.startup_timeout"), so that the message says what to
	// raise; "" for a bound of the gateway's own.
	Setting string
}

func (e *TimeoutError) Error() string {
	switch {
	case e.Setting != "":
		return fmt.Sprintf("no answer to %s within %s (%s)", e.Method, e.Setting, e.After)
	case e.After > 0:
		return fmt.Sprintf("no answer to %s within %s", e.Method, e.After)
	}
	return fmt.Sprintf("no answer to %s before the deadline", e.Method)
}

// bound is the cancellation cause of a deadline set by WithBound.
type bound struct {
	after   time.Duration
	setting string
}

func (b *bound) Error() string { return fmt.Sprintf("%s elapsed (%s)", b.after, b.setting) }

// WithBound returns ctx with a deadline d from now. A call that runs out of
// it reports a TimeoutError naming d and setting, the config key an
// operator would raise, even when the call's own (per-request) bound is
// the longer one: the first deadline to fire is the one named.
func WithBound(ctx context.Context, d time.Duration, setting string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, &bound{after: d, setting: setting})
}

// sooner reports whether ctx has a deadline before d from now: a bound
// of d would never be the one to fire (nor be named), so it is not set
// (a timer and a context less for the call).
func sooner(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < d
}

// ctxErr is the error of a call whose ctx ended: a TimeoutError naming the
// bound that fired, or the cancellation.
func (c *Client) ctxErr(ctx context.Context, method string) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	var b *bound
	if errors.As(context.Cause(ctx), &b) {
		return &TimeoutError{Method: method, After: b.after, Setting: b.setting}
	}
	return &TimeoutError{Method: method}
}

func (c *Client) closedErr() error {
	if err := c.t.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return ErrClosed
}

func (c *Client) forget(cl *call) {
	c.mu.Lock()
	delete(c.pending, string(cl.id))
	if cl.token != nil {
		delete(c.progress, string(cl.token))
	}
	c.mu.Unlock()
}

// failAll wakes every waiting call with "connection closed".
func (c *Client) failAll() {
	c.mu.Lock()
	for k, cl := range c.pending {
		select {
		case cl.done <- nil:
		default:
		}
		delete(c.pending, k)
	}
	c.mu.Unlock()
}

// deliver handles one message from the upstream (a DeliverFunc).
func (c *Client) deliver(data []byte, related jsonrpc.ID) (answered bool) {
	m, err := jsonrpc.ParseOwned(data) // DeliverFunc: data is handed over
	if err != nil {
		var je *jsonrpc.Error
		if m == nil || m.Kind() != jsonrpc.KindResponse || !m.ID.Valid() || !errors.As(err, &je) {
			c.log.Warn("dropping malformed message from upstream", zap.Error(err), zap.Int("bytes", len(data)))
			return false
		}
		// An answer that cannot be read one way (a member twice, say):
		// its call fails now, naming why, rather than at its timeout.
		c.log.Warn("refusing a malformed answer from upstream", zap.Error(err), zap.String("id", m.ID.String()))
		m = jsonrpc.NewError(m.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "mcpgw refused the upstream's answer: %s", je.Message))
	}
	switch m.Kind() {
	case jsonrpc.KindResponse:
		answered = related != nil && string(m.ID) == string(related)
		c.mu.Lock()
		cl := c.pending[string(m.ID)]
		delete(c.pending, string(m.ID))
		c.mu.Unlock()
		if cl == nil {
			// Late answer to a cancelled or timed-out call: dropped, never misrouted.
			c.log.Debug("dropping response to unknown or abandoned request", zap.String("id", m.ID.String()))
			return
		}
		cl.done <- m
	case jsonrpc.KindNotification:
		if m.Method == mcp.NotificationProgress && c.deliverProgress(m.Params) {
			return
		}
		if related == nil {
			// stdio: a subscriptions/listen stream's messages name it.
			related = subscriptionID(m.Params)
		}
		if m.Method == mcp.NotificationMessage || related != nil {
			if cl := c.owner(related); cl != nil {
				if notify := cl.opts.NotifyFunc(); notify != nil {
					notify(m.Method, m.Params)
					return
				}
			}
		}
		if m.Method == mcp.NotificationSubscriptionsAcked {
			return // for the stream that asked, which has ended
		}
		if c.opts.OnNotification != nil {
			c.opts.OnNotification(m.Method, m.Params)
		}
	case jsonrpc.KindRequest:
		c.serverRequest(m, related) // serverrequests.go
	}
	return answered
}

// owner finds the call a server-initiated message belongs to: the one whose
// response stream carried it, or, when the transport cannot tell (stdio),
// the only interactive call in flight. With several in flight there is no
// safe answer, and nil keeps the message from reaching the wrong caller.
//
// One refinement: a parked call (CallOptions.Parked: the gateway holds its
// upstream request until the 2026-07-28 client retries, for minutes, and an
// abandoned one until it expires) is blocked in a request whose answer the
// gateway itself withholds, so it is not counted while another call is in
// flight; otherwise every other caller's sampling or elicitation on the
// same stdio upstream would be refused meanwhile. Its own requests come in
// one burst, which the bridge gathers before parking it. A call merely
// waiting on a person is not special-cased: that would be a guess.
func (c *Client) owner(related jsonrpc.ID) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	if related != nil {
		return c.pending[string(related)]
	}
	var only, blocked *call
	nBlocked := 0
	for _, cl := range c.pending {
		if !cl.opts.Interactive() {
			continue
		}
		if cl.opts.Parked != nil && cl.opts.Parked() {
			nBlocked++
			blocked = cl
			continue
		}
		if only != nil {
			return nil
		}
		only = cl
	}
	if only != nil {
		return only
	}
	if nBlocked == 1 {
		return blocked
	}
	return nil
}

func (c *Client) deliverProgress(params json.RawMessage) bool {
	tok, ok := rawjson.Get(params, "progressToken")
	if !ok {
		return false
	}
	c.mu.Lock()
	cl := c.progress[string(tok)]
	c.mu.Unlock()
	if cl == nil {
		return false
	}
	progress := cl.opts.ProgressFunc()
	if progress == nil {
		return true
	}
	p, err := rawjson.Set(params, "progressToken", cl.orig)
	if err != nil {
		return false
	}
	progress(p)
	return true
}

func (c *Client) answer(m *jsonrpc.Message, owner *call) {
	handler := c.opts.OnRequest
	if owner != nil && owner.opts.CanAsk() {
		handler = owner.opts.Ask
	}
	var resp *jsonrpc.Message
	switch {
	case handler != nil:
		if owner != nil {
			upstreamRequestEvent(owner.ctx, m.Method) // span.go
		}
		res, rerr := handler(c.ctx, m.Method, m.Params)
		switch {
		case rerr != nil:
			resp = jsonrpc.NewError(m.ID, rerr)
		case res != nil:
			resp = jsonrpc.NewResult(m.ID, res)
		}
	}
	if resp == nil {
		resp = jsonrpc.NewError(m.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "mcpgw does not support %q from upstreams", m.Method))
	}
	c.send(m.Method, resp)
}

// hopMeta gives a request the per-hop _meta of its upstream's revision. A
// 2026-07-28 caller's per-hop keys (io.modelcontextprotocol/*) are removed
// for an upstream that negotiated an older revision, which would otherwise
// take the request for a stateless one.
func (c *Client) hopMeta(params json.RawMessage, opts CallOptions) (json.RawMessage, error) {
	if c.modern {
		return c.modernMeta(params, opts)
	}
	return mcp.WithoutHopMeta(params)
}

// modernMeta gives a request to a stateless upstream its per-request _meta.
// A 2026-07-28 caller's own version, capabilities and log level are kept (the
// upstream must judge what that client can do); for an older caller the
// gateway speaks, declaring the caller's capabilities when given
// (opts.Capabilities) and its own otherwise.
func (c *Client) modernMeta(params json.RawMessage, opts CallOptions) (json.RawMessage, error) {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	var err error
	if !opts.PassInputRequired {
		// An older caller (a session) does not speak for this hop: 2026
		// keys of its own (capabilities it never declared, a version) would
		// be taken for a stateless caller's. The gateway's replace them.
		if params, err = mcp.WithoutHopMeta(params); err != nil {
			return nil, err
		}
	}
	meta, ok := rawjson.Get(params, "_meta")
	if !ok {
		meta = json.RawMessage(`{}`)
	}
	if _, has := rawjson.Get(meta, mcp.MetaProtocolVersion); has {
		return params, nil
	}
	if meta, err = rawjson.SetString(meta, mcp.MetaProtocolVersion, string(mcp.Version20260728)); err != nil {
		return nil, err
	}
	caps := c.opts.Capabilities
	if opts.Capabilities != nil {
		caps = opts.Capabilities
	}
	if meta, err = rawjson.Set(meta, mcp.MetaClientCapabilities, caps); err != nil {
		return nil, err
	}
	info, _ := json.Marshal(c.opts.ClientInfo)
	if meta, err = rawjson.Set(meta, mcp.MetaClientInfo, info); err != nil {
		return nil, err
	}
	if opts.LogLevel != "" {
		if meta, err = rawjson.SetString(meta, mcp.MetaLogLevel, opts.LogLevel); err != nil {
			return nil, err
		}
	}
	return rawjson.Set(params, "_meta", meta)
}

// progressToken returns params._meta.progressToken.
func progressToken(params json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(params, []byte("progressToken")) && bytes.IndexByte(params, '\\') < 0 {
		// Most calls carry none: no scan of the params for it. (A key
		// spelled with escapes has a backslash, and is looked for.)
		return nil, false
	}
	meta, ok := rawjson.Get(params, "_meta")
	if !ok {
		return nil, false
	}
	tok, ok := rawjson.Get(meta, "progressToken")
	if !ok || string(tok) == "null" {
		return nil, false
	}
	return tok, true
}

func setProgressToken(params, tok json.RawMessage) (json.RawMessage, error) {
	meta, _ := rawjson.Get(params, "_meta")
	meta, err := rawjson.Set(meta, "progressToken", tok)
	if err != nil {
		return nil, err
	}
	return rawjson.Set(params, "_meta", meta)
}
