package credentials

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/internal/auth"
	"github.com/mcpgw/mcpgw/internal/config"
)

// TestSubjectCellKeepsItsPrincipal: a connection's subject takes a fresher
// downstream token of its own principal, and never another principal's.
func TestSubjectCellKeepsItsPrincipal(t *testing.T) {
	alice := &auth.Principal{Subject: "alice", Issuer: "https://idp"}
	cell := NewCell(Subject{Principal: alice, Token: "a1"})
	for _, tc := range []struct {
		name string
		in   Subject
		want string
	}{
		{"alice's renewed token", Subject{Principal: &auth.Principal{Subject: "alice", Issuer: "https://idp"}, Token: "a2"}, "a2"},
		{"another issuer's alice", Subject{Principal: &auth.Principal{Subject: "alice", Issuer: "https://other-idp"}, Token: "b1"}, "a2"},
		{"bob", Subject{Principal: &auth.Principal{Subject: "bob", Issuer: "https://idp"}, Token: "b2"}, "a2"},
		{"an API key of the same name", Subject{Principal: &auth.Principal{Subject: "alice", APIKey: "alice"}, Token: "k"}, "a2"},
		{"no token", Subject{Principal: alice}, "a2"},
	} {
		cell.Update(tc.in)
		if got := cell.get(); got.Token != tc.want || got.Key() != alice.Key() {
			t.Errorf("after %s: %s's token %q, want alice's %q", tc.name, got.Principal, got.Token, tc.want)
		}
	}
}

type fixedSource struct {
	mu   sync.Mutex
	subs []string
}

func (f *fixedSource) Kind() Kind { return KindExchanged }
func (f *fixedSource) Token(_ context.Context, s Subject) (string, error) {
	f.mu.Lock()
	f.subs = append(f.subs, s.Principal.Subject)
	f.mu.Unlock()
	return "up-" + s.Principal.Subject, nil
}
func (f *fixedSource) Refused(context.Context, Subject, string) {}

// TestSourceTransportOrigin: the upstream's origin gets the subject's
// token in place of any Authorization the request had; another origin (a
// redirect) gets none, and the Source is not asked for it.
func TestSourceTransportOrigin(t *testing.T) {
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Host+" "+r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, "other "+r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer other.Close()
	src := &fixedSource{}
	cell := NewCell(Subject{Principal: &auth.Principal{Subject: "alice", Issuer: "https://idp"}, Token: "downstream-alice"})
	c := &http.Client{Transport: &sourceTransport{upstream: "u", origin: originOf(srv.URL), src: src, cell: cell, base: http.DefaultTransport}}
	for _, u := range []string{srv.URL + "/mcp", other.URL + "/elsewhere"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer static-from-config")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(got) != 2 || !strings.HasSuffix(got[0], " Bearer up-alice") || got[1] != "other " {
		t.Errorf("requests carried %q, want the upstream Bearer up-alice and the other origin nothing", got)
	}
	if len(src.subs) != 1 {
		t.Errorf("the Source was asked %d times, want once (for the upstream's origin only)", len(src.subs))
	}
	for _, g := range got {
		if strings.Contains(g, "downstream-alice") {
			t.Errorf("the downstream token went out: %q", g)
		}
	}
}

// escalatingSource is a fixedSource that can step up: it records what it
// was told and answers with answer.
type escalatingSource struct {
	fixedSource
	answer error
	told   [][]string // the challenges, one per call
	tokens []string
}

func (e *escalatingSource) InsufficientScope(_ context.Context, _ Subject, token string, challenge []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.told = append(e.told, challenge)
	e.tokens = append(e.tokens, token)
	return e.answer
}

// TestSourceTransportStepUp: a 403 insufficient_scope goes to a Source
// that can step up, whose authorization link answers the request instead
// of the refusal; a 403 of another kind, a Source that cannot step up, or
// one that has nothing new to ask for leave the upstream's 403 as it is.
func TestSourceTransportStepUp(t *testing.T) {
	const insufficient = `Bearer error="insufficient_scope", scope="mcp:write", resource_metadata="https://up/meta"`
	link := &AuthorizationRequiredError{Upstream: "u", URL: "https://gw/oauth/upstream/u/start?t=x"}
	for _, tc := range []struct {
		name      string
		challenge string // the 403's WWW-Authenticate ("" for none)
		steps     bool   // the Source is a ScopeEscalator
		answer    error
		wantErr   bool // the request fails with the link
		wantTold  int
	}{
		{"step-up link", insufficient, true, link, true, 1},
		{"nothing new to ask for", insufficient, true, nil, false, 1},
		{"another 403", `Bearer error="invalid_token"`, true, link, false, 0},
		{"a 403 without a challenge", "", true, link, false, 0},
		{"a source that cannot step up", insufficient, false, link, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.challenge != "" {
					w.Header().Set("WWW-Authenticate", tc.challenge)
				}
				w.WriteHeader(http.StatusForbidden)
			}))
			defer srv.Close()
			esc := &escalatingSource{answer: tc.answer}
			var src Source = &esc.fixedSource
			if tc.steps {
				src = esc
			}
			cell := NewCell(Subject{Principal: &auth.Principal{Subject: "alice", Issuer: "https://idp"}})
			c := &http.Client{Transport: &sourceTransport{upstream: "u", origin: originOf(srv.URL), src: src, cell: cell, base: http.DefaultTransport}}
			resp, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
			var are *AuthorizationRequiredError
			switch {
			case tc.wantErr && !errors.As(err, &are):
				t.Fatalf("err = %v, want the step-up link", err)
			case !tc.wantErr && err != nil:
				t.Fatalf("err = %v, want the upstream's 403", err)
			case !tc.wantErr && resp.StatusCode != http.StatusForbidden:
				t.Fatalf("status %d, want the upstream's 403", resp.StatusCode)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if len(esc.told) != tc.wantTold {
				t.Fatalf("the Source was told of %d insufficient_scope answers, want %d", len(esc.told), tc.wantTold)
			}
			if tc.wantTold > 0 && (len(esc.told[0]) != 1 || esc.told[0][0] != tc.challenge || esc.tokens[0] != "up-alice") {
				t.Errorf("told challenge %q for token %q, want %q for up-alice", esc.told[0], esc.tokens[0], tc.challenge)
			}
		})
	}
}

// TestUpstreamKinds: what NewUpstream makes of an upstream's config is the
// host's whole view of its credentials — the kind audit records carry,
// whether it acts for its callers, whether a shared connection can carry
// a credential of its own — and a per-user hook that fails to build its
// Source fails the upstream's calls closed instead of leaving them
// unauthorized.
func TestUpstreamKinds(t *testing.T) {
	const url = "https://up.example.com/mcp"
	hook := func(src Source, err error) SourceFunc {
		return func(context.Context, string, *config.Upstream) (Source, error) { return src, err }
	}
	for _, tc := range []struct {
		name         string
		cfg          config.Upstream
		hook         SourceFunc
		kind         Kind
		acts, hasOwn bool
	}{
		{"nothing", config.Upstream{URL: url}, nil, KindNone, false, false},
		{"a header that is not Authorization", config.Upstream{URL: url, Headers: map[string]string{"X-Api-Key": "k"}}, nil, KindNone, false, false},
		{"an Authorization header in any case", config.Upstream{URL: url, Headers: map[string]string{"aUTHORIZATION": "Bearer x"}}, nil, KindStatic, false, true},
		{"oauth", config.Upstream{URL: url, OAuth: &config.UpstreamOAuth{TokenURL: "https://idp.example.com/token", ClientID: "c"}}, nil, KindClientCredentials, false, true},
		{"token exchange", config.Upstream{URL: url, Auth: &config.UpstreamAuth{TokenExchange: &config.UpstreamTokenExchange{TokenURL: "https://idp.example.com/token"}}}, nil, KindExchanged, true, false},
		{"token exchange with oauth for the shared connection", config.Upstream{URL: url, OAuth: &config.UpstreamOAuth{TokenURL: "https://idp.example.com/token"}, Auth: &config.UpstreamAuth{TokenExchange: &config.UpstreamTokenExchange{TokenURL: "https://idp.example.com/token"}}}, nil, KindExchanged, true, true},
		{"forwarded headers", config.Upstream{URL: url, ForwardHeaders: []config.ForwardHeader{{Name: "X-Tenant"}}}, nil, KindForwarded, true, false},
		{"a stdio child's forwarded headers go nowhere", config.Upstream{Command: []string{"srv"}, ForwardHeaders: []config.ForwardHeader{{Name: "X-Tenant"}}}, nil, KindNone, false, false},
		{"the hook's Source first", config.Upstream{URL: url, Auth: &config.UpstreamAuth{TokenExchange: &config.UpstreamTokenExchange{TokenURL: "https://idp.example.com/token"}}}, hook(&userKind{}, nil), KindPerUser, true, false},
		{"the hook passing leaves the built-in kinds", config.Upstream{URL: url, Auth: &config.UpstreamAuth{TokenExchange: &config.UpstreamTokenExchange{TokenURL: "https://idp.example.com/token"}}}, hook(nil, nil), KindExchanged, true, false},
		{"the hook failing", config.Upstream{URL: url}, hook(nil, errors.New("no token store")), KindPerUser, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := NewUpstream(t.Context(), "up", &tc.cfg, &http.Client{}, Env{Source: tc.hook})
			if k, acts, own := u.Kind(), u.ActsForCaller(), u.HasOwn(); k != tc.kind || acts != tc.acts || own != tc.hasOwn {
				t.Fatalf("kind %q, acts for caller %v, has its own %v; want %q, %v, %v", k, acts, own, tc.kind, tc.acts, tc.hasOwn)
			}
			if (tc.cfg.OAuth != nil) != (u.SharedClient().Transport != nil) {
				t.Fatalf("shared client's transport %T with oauth %v", u.SharedClient().Transport, tc.cfg.OAuth != nil)
			}
			if tc.name != "the hook failing" {
				return
			}
			_, err := u.ActingClient(NewCell(Subject{Principal: &auth.Principal{Subject: "alice", Issuer: "https://idp"}})).Get(url)
			var ce *CredentialError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), `upstream "up": its credentials could not be set up: no token store`) {
				t.Fatalf("a call through the failed source: %v", err)
			}
		})
	}
}

type userKind struct{ fixedSource }

func (*userKind) Kind() Kind { return KindPerUser }
