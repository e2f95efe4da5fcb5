// Package faulty owns a misbehaving MCP server for tests and the soak
// (test/soak). It speaks MCP over stdio and Streamable HTTP like a
// well-behaved server until a tool call asks it to fail; then it fails the
// way real servers do: it crashes mid-call, hangs, prints garbage or a huge
// line, floods stderr, answers slowly, resets the connection after the
// request was sent, forgets the session, cuts its SSE stream after some
// events, or changes its tool list.
//
// A call scripts its own fault: the tool's name is the fault's Kind and its
// arguments (Fault.Arguments) tune it. Every call carries a token, and every
// answer carries exactly that token back (ResultToken), so a caller can
// check that an answer belongs to its request. The server is written by
// hand on net/http and internal/jsonrpc rather than on an SDK, because
// these faults need control of the raw bytes and the connection.
//
// The program test/faulty/cmd/faulty runs it (stdio by default, or --http).
package faulty

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind names what a call makes the server do. Each kind is a tool of the
// same name.
type Kind string

// The kinds. What each does on each transport:
//
//	kind          stdio                                  Streamable HTTP
//	echo          answers                                answers
//	slow          progress every Delay/Events, answers   the same, on the call's SSE stream
//	              after Delay; cancelled: no answer
//	hang          never answers, ignores cancellation    SSE headers, then nothing until the client
//	                                                     closes the connection (cancellation ignored)
//	crash         exits with status 3 after Delay        after Delay forgets every session and aborts
//	                                                     every call in flight, this one's connection
//	                                                     closed without an answer
//	garbage       Bytes of non-JSON, a truncated JSON    the same as SSE events on the call's stream,
//	              line, invalid UTF-8 and a response     then answers
//	              to no request on stdout, then answers
//	huge          answers with Bytes of padding          the same (one SSE event)
//	stderr        writes Bytes of lines to stderr,       the same, to the server's stderr writer
//	              then answers
//	reset         as crash                               after Delay, resets the connection (RST),
//	                                                     the request read, no answer
//	expire        as crash                               forgets the session, ending its calls in flight:
//	                                                     this request and every later one on it get
//	                                                     HTTP 404; the same token on a new session
//	                                                     (the client's retry) is answered
//	drop          Events notifications, then answers     a priming event and Events notifications,
//	                                                     then the stream is closed; the answer waits
//	                                                     for a GET with Last-Event-ID (unless NoResume)
//	list_changed  changes the tool list (a gen_N tool    the same; the notification goes to each
//	              comes or goes) and sends               session's GET stream
//	              notifications/tools/list_changed
//	grandchild    starts a grandchild process that       answers (no process)
//	              sleeps until killed, then answers
//
// A 2026-07-28 request over HTTP (Options.Modern) has no session: expire
// answers as echo does and drop's stream cannot be resumed.
const (
	Echo        Kind = "echo"
	Slow        Kind = "slow"
	Hang        Kind = "hang"
	Crash       Kind = "crash"
	Garbage     Kind = "garbage"
	Huge        Kind = "huge"
	Stderr      Kind = "stderr"
	Reset       Kind = "reset"
	Expire      Kind = "expire"
	Drop        Kind = "drop"
	ListChanged Kind = "list_changed"
	Grandchild  Kind = "grandchild"
)

// Kinds lists every kind, in the order tools/list shows them.
var Kinds = []Kind{Echo, Slow, Hang, Crash, Garbage, Huge, Stderr, Reset, Expire, Drop, ListChanged, Grandchild}

// Bounds on what one call may ask for, so that a typo cannot exhaust the
// machine.
const (
	MaxBytes  = 64 << 20
	MaxDelay  = 10 * time.Minute
	MaxEvents = 10000
)

// Fault is one scripted call.
type Fault struct {
	Kind Kind
	// Token is echoed back in the answer (ResultToken).
	Token string
	// Delay: how long slow takes to answer, and how long crash, reset and
	// drop wait before acting.
	Delay time.Duration
	// Bytes: the size of garbage, of huge's padding and of stderr's flood.
	Bytes int
	// Events: progress notifications sent by slow (spread over Delay) and
	// notifications sent by drop before it cuts the stream.
	Events int
	// NoResume: drop's answer is thrown away, so resuming the cut stream
	// fails (HTTP 400).
	NoResume bool
}

// args is the wire form of a Fault's tuning, the tool call's arguments.
type args struct {
	Token    string `json:"token"`
	DelayMS  int64  `json:"delay_ms,omitempty"`
	Bytes    int    `json:"bytes,omitempty"`
	Events   int    `json:"events,omitempty"`
	NoResume bool   `json:"no_resume,omitempty"`
}

// Arguments is the tools/call arguments object that scripts f.
func (f Fault) Arguments() json.RawMessage {
	b, _ := json.Marshal(args{Token: f.Token, DelayMS: f.Delay.Milliseconds(), Bytes: f.Bytes, Events: f.Events, NoResume: f.NoResume})
	return b
}

// Tool is the tool's name as a caller sees it: prefix (e.g. "faulty__" on a
// prefixed gateway route, "" directly) and the kind.
func (f Fault) Tool(prefix string) string { return prefix + string(f.Kind) }

// CallParams is the params of a tools/call that scripts f, with the tool
// named as Tool(prefix). progressToken, when not empty, goes into _meta.
func (f Fault) CallParams(prefix, progressToken string) json.RawMessage {
	p := map[string]any{"name": f.Tool(prefix), "arguments": f.Arguments()}
	if progressToken != "" {
		p["_meta"] = map[string]string{"progressToken": progressToken}
	}
	b, _ := json.Marshal(p)
	return b
}

// parseCall reads a tools/call's params into the fault it scripts. Names
// other than the kinds are the gen_N tool (an echo when N is the current
// generation) or unknown.
func parseCall(params json.RawMessage) (Fault, string, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return Fault{}, "", fmt.Errorf("tools/call params: %v", err)
	}
	var a args
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if err := json.Unmarshal(p.Arguments, &a); err != nil {
			return Fault{}, p.Name, fmt.Errorf("tool %q: arguments: %v (want token, delay_ms, bytes, events, no_resume)", p.Name, err)
		}
	}
	f := Fault{Kind: Kind(p.Name), Token: a.Token, Delay: time.Duration(a.DelayMS) * time.Millisecond, Bytes: a.Bytes, Events: a.Events, NoResume: a.NoResume}
	switch {
	case f.Delay < 0 || f.Delay > MaxDelay:
		return f, p.Name, fmt.Errorf("tool %q: delay_ms %d is outside 0..%d", p.Name, a.DelayMS, MaxDelay.Milliseconds())
	case f.Bytes < 0 || f.Bytes > MaxBytes:
		return f, p.Name, fmt.Errorf("tool %q: bytes %d is outside 0..%d", p.Name, a.Bytes, MaxBytes)
	case f.Events < 0 || f.Events > MaxEvents:
		return f, p.Name, fmt.Errorf("tool %q: events %d is outside 0..%d", p.Name, a.Events, MaxEvents)
	}
	return f, p.Name, nil
}

// result is a tools/call result carrying token as its first content item;
// pad adds a second item of that many bytes (the huge fault).
func result(token string, pad int, extra ...string) json.RawMessage {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	content := []text{{"text", token}}
	if pad > 0 {
		content = append(content, text{"text", strings.Repeat("x", pad)})
	}
	for _, e := range extra {
		content = append(content, text{"text", e})
	}
	b, _ := json.Marshal(struct {
		Content []text `json:"content"`
		IsError bool   `json:"isError"`
	}{content, false})
	return b
}

// ErrNoToken is returned by ResultToken for a result that is not one of
// this server's answers.
var ErrNoToken = errors.New("faulty: the result carries no token (content[0] is not a text item)")

// ResultToken returns the token a tools/call result carries: the text of
// its first content item. Callers compare it with the token they sent.
func ResultToken(res json.RawMessage) (string, error) {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", fmt.Errorf("faulty: result: %v", err)
	}
	if len(r.Content) == 0 || r.Content[0].Type != "text" {
		return "", ErrNoToken
	}
	return r.Content[0].Text, nil
}
