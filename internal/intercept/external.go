package intercept

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config"
	"github.com/mcpgw/mcpgw/internal/outbound"
	"github.com/mcpgw/mcpgw/internal/rawjson"
)

// external is an operator's own interceptor service, called over HTTP(S)
// with the member to judge (docs/interceptors.md has the contract). The
// URL is the admin's own configuration, so loopback is allowed; it never
// follows a redirect (internal/outbound).
type external struct {
	cfg    *config.Interceptor
	client *http.Client
	slots  chan struct{} // max_concurrent
	token  string
}

func newExternal(ic *config.Interceptor) (*external, error) {
	x := &external{
		cfg:    ic,
		client: outbound.NoRedirects(&http.Client{Timeout: ic.Timeout.D()}),
		slots:  make(chan struct{}, max(ic.MaxConcurrent, 1)),
	}
	if ic.BearerTokenFile != "" {
		b, err := os.ReadFile(ic.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("interceptor %s: bearer_token_file: %w", ic.Name, err)
		}
		x.token = strings.TrimSpace(string(b))
	}
	return x, nil
}

// hookRequest is what the service receives.
type hookRequest struct {
	Phase     string          `json:"phase"`
	Route     string          `json:"route"`
	Upstream  string          `json:"upstream"`
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	Method    string          `json:"method"`
	Principal hookPrincipal   `json:"principal"`
	Member    json.RawMessage `json:"member"`
}

type hookPrincipal struct {
	ID     string   `json:"id"`
	Groups []string `json:"groups"`
}

// hookAnswer is what the service answers.
type hookAnswer struct {
	Decision string     `json:"decision"` // allow, deny, modify
	Reason   string     `json:"reason"`
	Edits    []hookEdit `json:"edits"`
}

// hookEdit replaces the value at Pointer (RFC 6901, into objects; ""
// is the whole member) with Value.
type hookEdit struct {
	Pointer string          `json:"pointer"`
	Value   json.RawMessage `json:"value"`
}

// judge calls the service; a failure is fail_closed (refused) or
// fail_open (passed) per the config. It never retries: a result phase
// has already run upstream, and a request phase would double the wait.
func (x *external) judge(ctx context.Context, phase string, t *Target, member []byte) (outcome string, out []byte, reason string) {
	ans, err := x.call(ctx, phase, t, member)
	if err == nil {
		switch ans.Decision {
		case "allow":
			return Allowed, nil, ""
		case "deny":
			r := ans.Reason
			if r == "" {
				r = "refused by the interceptor service"
			}
			return Denied, nil, r
		case "modify":
			out, err = applyEdits(member, ans.Edits)
			if err == nil {
				return Modified, out, ""
			}
		default:
			err = fmt.Errorf("the service answered decision %q; it must be allow, deny or modify", ans.Decision)
		}
	}
	return x.failed(err)
}

func (x *external) failed(err error) (string, []byte, string) {
	if x.cfg.Fail == config.FailOpen {
		return Passed, nil, err.Error()
	}
	return Failed, nil, "the interceptor service could not judge it (" + err.Error() + ")"
}

func (x *external) call(ctx context.Context, phase string, t *Target, member []byte) (*hookAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout.D())
	defer cancel()
	select {
	case x.slots <- struct{}{}:
		defer func() { <-x.slots }()
	case <-ctx.Done():
		return nil, fmt.Errorf("all %d of max_concurrent busy until the timeout; raise interceptors[].max_concurrent", cap(x.slots))
	}
	hr := hookRequest{Phase: phase, Route: t.Route, Upstream: t.Upstream, Kind: t.Kind, Name: t.Name, Method: t.Method, Member: member}
	if p := t.Principal; p != nil {
		hr.Principal = hookPrincipal{ID: p.Subject, Groups: p.Groups}
	}
	body, err := json.Marshal(hr)
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > x.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("the request would be %d bytes, over max_body_bytes %d", len(body), x.cfg.MaxBodyBytes)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if x.token != "" {
		req.Header.Set("Authorization", "Bearer "+x.token)
	}
	resp, err := x.client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer within the timeout of %s", x.cfg.Timeout.D())
		}
		return nil, errors.New("the service is unreachable")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the service answered HTTP %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, x.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, errors.New("reading the answer failed")
	}
	if int64(len(b)) > x.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("the answer is over max_body_bytes %d", x.cfg.MaxBodyBytes)
	}
	var ans hookAnswer
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, errors.New("the answer is not the JSON of a decision")
	}
	return &ans, nil
}

// applyEdits applies the service's edits to member as byte-span edits:
// only the values they replace change.
func applyEdits(member []byte, edits []hookEdit) ([]byte, error) {
	if len(edits) == 0 {
		return nil, errors.New("decision modify with no edits")
	}
	out := member
	for _, ed := range edits {
		if !json.Valid(ed.Value) {
			return nil, fmt.Errorf("edit %q: the value is not JSON", ed.Pointer)
		}
		var err error
		out, err = setPointer(out, ed.Pointer, ed.Value)
		if err != nil {
			return nil, fmt.Errorf("edit %q: %v", ed.Pointer, err)
		}
	}
	return out, nil
}

// setPointer replaces the value at an RFC 6901 pointer into objects.
func setPointer(doc []byte, ptr string, value []byte) ([]byte, error) {
	if ptr == "" {
		return value, nil
	}
	if ptr[0] != '/' {
		return nil, errors.New("a pointer starts with /")
	}
	key, rest, _ := strings.Cut(ptr[1:], "/")
	key = strings.ReplaceAll(strings.ReplaceAll(key, "~1", "/"), "~0", "~")
	if rest == "" && !strings.Contains(ptr[1:], "/") {
		return rawjson.Set(doc, key, value)
	}
	inner, ok := rawjson.Get(doc, key)
	if !ok {
		return nil, fmt.Errorf("no member %q", key)
	}
	v, err := setPointer(inner, "/"+rest, value)
	if err != nil {
		return nil, err
	}
	return rawjson.Set(doc, key, v)
}
