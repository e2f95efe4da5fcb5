package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/mcpgw/mcpgw/internal/mcp"
	"github.com/mcpgw/mcpgw/internal/sse"
)

// downstream is the driver's MCP client of the gateway: raw JSON-RPC over
// Streamable HTTP, so that exactly the traffic a scenario needs is sent and
// nothing else. It speaks either a legacy revision (initialize handshake,
// a session, server→client requests on the POST's event stream) or
// 2026-07-28 (per-request _meta, input_required retried with the answers).
type downstream struct {
	url     string
	version string
	hc      *http.Client
	caps    json.RawMessage
	// answer handles a server→client request (legacy) or one input request of
	// an input_required result (2026-07-28).
	answer func(method string, params json.RawMessage) (json.RawMessage, error)
	logf   func(format string, args ...any)

	// bearer is the driver's downstream credential (an auth.api_keys key),
	// when the gateway authenticates its callers.
	bearer string
	// authorize visits an authorization link the gateway answered with
	// (-32042 URL elicitation, or a URL-mode elicitation/create), as the
	// user's browser would; nil: no per-user authorization.
	authorize func(ctx context.Context, link string) error

	session string
	nextID  atomic.Int64
	init    json.RawMessage            // the gateway's initialize (or discover) result
	schemas map[string]json.RawMessage // tool → inputSchema, for 2026-07-28's Mcp-Param-* headers
}

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

var clientInfo = mcp.Implementation{Name: "mcpgw-conformance-driver", Version: "1.0.0"}

// stateless reports whether revision v is the stateless one (per-request
// _meta, no initialize): 2026-07-28, the only one so far.
func stateless(v string) bool { return v == string(mcp.Version20260728) }

// open runs the handshake: initialize + notifications/initialized, or
// server/discover for 2026-07-28.
func (d *downstream) open(ctx context.Context) error {
	if stateless(d.version) {
		res, err := d.call(ctx, mcp.MethodServerDiscover, map[string]any{})
		d.init = res
		return err
	}
	res, err := d.call(ctx, mcp.MethodInitialize, map[string]any{
		"protocolVersion": d.version,
		"capabilities":    d.caps,
		"clientInfo":      clientInfo,
	})
	if err != nil {
		return err
	}
	d.init = res
	return d.notify(ctx, mcp.NotificationInitialized)
}

// capability reports whether the gateway's handshake result declares key.
func (d *downstream) capability(key string) bool {
	var r struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(d.init, &r)
	_, ok := r.Capabilities[key]
	return ok
}

func (d *downstream) notify(ctx context.Context, method string) error {
	body, _ := json.Marshal(message{JSONRPC: "2.0", Method: method})
	resp, err := d.post(ctx, body, method, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("%s: HTTP %d, want 202", method, resp.StatusCode)
	}
	return nil
}

// maxAuthorizations bounds the authorization links one request may be
// answered with before the driver gives up.
const maxAuthorizations = 3

// call sends a request and returns its result. A -32042 answer (URL
// elicitation required: the caller must authorize the gateway at the
// upstream first) has its links visited and the request sent again.
func (d *downstream) call(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	for n := 0; ; n++ {
		res, err := d.callOnce(ctx, method, params)
		links := urlElicitations(err)
		if len(links) == 0 || d.authorize == nil || n == maxAuthorizations {
			return res, err
		}
		for _, link := range links {
			d.logf("%s: the gateway asks for authorization at %s", method, link)
			if aerr := d.authorize(ctx, link); aerr != nil {
				return nil, fmt.Errorf("%s: authorizing at %s: %w", method, link, aerr)
			}
		}
	}
}

// urlElicitations are the URLs of a -32042 error's elicitations.
func urlElicitations(err error) []string {
	var re *rpcError
	if !errors.As(err, &re) || re.Code != mcp.CodeURLElicitationRequired {
		return nil
	}
	var data struct {
		Elicitations []struct {
			Mode string `json:"mode"`
			URL  string `json:"url"`
		} `json:"elicitations"`
	}
	_ = json.Unmarshal(re.Data, &data)
	var links []string
	for _, e := range data.Elicitations {
		if e.URL != "" {
			links = append(links, e.URL)
		}
	}
	return links
}

// callOnce sends a request and returns its result. For 2026-07-28 an
// input_required result is answered and retried (a new id each round),
// echoing requestState exactly when the gateway sent one.
func (d *downstream) callOnce(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	if !stateless(d.version) {
		return d.roundTrip(ctx, method, params)
	}
	for round := 0; ; round++ {
		p := map[string]any{}
		for k, v := range params {
			p[k] = v
		}
		p["_meta"] = map[string]any{
			mcp.MetaProtocolVersion:    d.version,
			mcp.MetaClientInfo:         clientInfo,
			mcp.MetaClientCapabilities: d.caps,
		}
		res, err := d.roundTrip(ctx, method, p)
		if err != nil {
			return nil, err
		}
		var ir struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  *string                    `json:"requestState"`
		}
		_ = json.Unmarshal(res, &ir)
		if ir.ResultType != "input_required" {
			return res, nil
		}
		if round == 5 {
			return nil, fmt.Errorf("%s: still input_required after %d rounds", method, round)
		}
		answers := map[string]json.RawMessage{}
		for key, raw := range ir.InputRequests {
			var req struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(raw, &req); err != nil {
				return nil, fmt.Errorf("%s: input request %q: %v", method, key, err)
			}
			a, err := d.answer(req.Method, req.Params)
			if err != nil {
				return nil, err
			}
			answers[key] = a
		}
		params = cloneWith(params, "inputResponses", answers)
		if ir.RequestState != nil {
			params["requestState"] = *ir.RequestState
		} else {
			delete(params, "requestState")
		}
	}
}

func cloneWith(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for key, val := range m {
		if key != k {
			out[key] = val
		}
	}
	return out
}

// roundTrip POSTs one request and reads its answer: a JSON body, or an
// event stream on which server→client requests are answered until the
// response comes.
func (d *downstream) roundTrip(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	id := json.RawMessage(strconv.FormatInt(d.nextID.Add(1), 10))
	pb, _ := json.Marshal(params)
	body, _ := json.Marshal(message{JSONRPC: "2.0", ID: id, Method: method, Params: pb})
	resp, err := d.post(ctx, body, method, params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get(mcp.HeaderSessionID); sid != "" && d.session == "" {
		d.session = sid
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case mcp.ContentTypeEventStream:
		rd := sse.NewReader(resp.Body, 16<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				return nil, fmt.Errorf("%s: event stream ended without an answer: %v", method, err)
			}
			if len(bytes.TrimSpace(ev.Data)) == 0 {
				continue
			}
			var m message
			if err := json.Unmarshal(ev.Data, &m); err != nil {
				return nil, fmt.Errorf("%s: unreadable event %q: %v", method, ev.Data, err)
			}
			switch {
			case m.Method != "" && m.ID != nil:
				if err := d.reply(ctx, m); err != nil {
					return nil, err
				}
			case m.Method != "":
				d.logf("notification during %s: %s", method, m.Method)
			case string(m.ID) == string(id):
				return result(method, m)
			}
		}
	case mcp.ContentTypeJSON:
		b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return nil, err
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: HTTP %d, unreadable body %q", method, resp.StatusCode, b)
		}
		return result(method, m)
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s: HTTP %d %s: %s", method, resp.StatusCode, mt, b)
	}
}

func result(method string, m message) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, fmt.Errorf("%s: %w", method, m.Error)
	}
	return m.Result, nil
}

// reply answers a server→client request on the session.
func (d *downstream) reply(ctx context.Context, req message) error {
	out := message{JSONRPC: "2.0", ID: req.ID}
	res, err := d.answer(req.Method, req.Params)
	if err != nil {
		out.Error = &rpcError{Code: -32601, Message: err.Error()}
	} else {
		out.Result = res
	}
	b, _ := json.Marshal(out)
	resp, err := d.post(ctx, b, "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("answer to %s: HTTP %d, want 202", req.Method, resp.StatusCode)
	}
	return nil
}

func (d *downstream) post(ctx context.Context, body []byte, method string, params map[string]any) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mcp.ContentTypeJSON)
	req.Header.Set("Accept", mcp.ContentTypeJSON+", "+mcp.ContentTypeEventStream)
	if d.session != "" {
		req.Header.Set(mcp.HeaderSessionID, d.session)
	}
	if d.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+d.bearer)
	}
	if d.init != nil || stateless(d.version) {
		req.Header.Set(mcp.HeaderProtocolVersion, d.version)
	}
	if stateless(d.version) && method != "" {
		req.Header.Set(mcp.HeaderMethod, method)
		if f := mcp.NameHeaderField(method); f != "" {
			if v, ok := params[f].(string); ok {
				req.Header.Set(mcp.HeaderName, mcp.EncodeHeaderValue(v))
			}
		}
		if name, _ := params["name"].(string); method == mcp.MethodToolsCall && d.schemas[name] != nil {
			args, _ := json.Marshal(params["arguments"])
			h, err := mcp.ParamHeaders(d.schemas[name], args)
			if err != nil {
				return nil, fmt.Errorf("tools/call %s: %v", name, err)
			}
			for k, v := range h {
				req.Header[k] = v
			}
		}
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", d.url, err)
	}
	return resp, nil
}

// errNoAnswer is returned for server→client requests the driver does not handle.
var errNoAnswer = errors.New("the conformance driver does not answer this request")
