package idptest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"
)

// Browser is one user's browser: a cookie jar that follows redirects and
// fills in the OP's login form with its user's name and password when a
// page shows it. Two Browsers are two people (their cookies, sessions
// and remembered consents are apart).
type Browser struct {
	Username, Password string
	HTTP               *http.Client
	// Logins counts the OP login forms this browser filled in (a
	// remembered consent fills none).
	Logins int
	// Visited are the URLs of every redirect followed, in order.
	Visited []*url.URL
	// StopAt, when set, ends a visit at the first redirect to a URL it
	// returns true for, without requesting it (the URL is in Page.URL):
	// a native client's redirect URI, where no server listens.
	StopAt func(*url.URL) bool
}

// Page is where a visit ended.
type Page struct {
	URL    *url.URL
	Status int
	Body   string
}

// NewBrowser is a browser of the user username with an empty cookie jar.
func NewBrowser(username, password string) *Browser {
	jar, _ := cookiejar.New(nil)
	b := &Browser{Username: username, Password: password}
	b.HTTP = &http.Client{
		Jar:     jar,
		Timeout: 20 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			b.Visited = append(b.Visited, req.URL)
			if b.StopAt != nil && b.StopAt(req.URL) {
				return http.ErrUseLastResponse
			}
			if len(via) > 20 {
				return fmt.Errorf("more than 20 redirects, the last to %s", req.URL)
			}
			return nil
		},
	}
	return b
}

// Visit opens u and follows the redirects; whenever a page is the OP's
// login form it submits it and follows on (a form that comes back with
// the OP's error, a refused login, is returned as it is).
func (b *Browser) Visit(ctx context.Context, u string) (*Page, error) {
	p, err := b.do(ctx, http.MethodGet, u, nil)
	for i := 0; err == nil && i < 5; i++ {
		m := hiddenID.FindStringSubmatch(p.Body)
		if m == nil || !strings.Contains(p.Body, `action="/login/username"`) {
			break
		}
		if e := loginError.FindStringSubmatch(p.Body); e != nil && strings.TrimSpace(e[1]) != "" {
			break
		}
		b.Logins++
		form := url.Values{"id": {m[1]}, "username": {b.Username}, "password": {b.Password}}
		login := p.URL.ResolveReference(&url.URL{Path: "/login/username"})
		p, err = b.do(ctx, http.MethodPost, login.String(), form)
	}
	return p, err
}

// Post submits form to u (a form of a page) and follows the redirects.
func (b *Browser) Post(ctx context.Context, u string, form url.Values) (*Page, error) {
	return b.do(ctx, http.MethodPost, u, form)
}

func (b *Browser) do(ctx context.Context, method, u string, form url.Values) (*Page, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	at := resp.Request.URL
	if resp.StatusCode/100 == 3 {
		if loc, err := resp.Location(); err == nil {
			at = loc // stopped by StopAt
		}
	}
	return &Page{URL: at, Status: resp.StatusCode, Body: string(data)}, nil
}
