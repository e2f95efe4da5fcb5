package oauthclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// TokenPost is one request to an OAuth token endpoint (RFC 6749 section
// 3.2): the grant's form, and how the client authenticates.
type TokenPost struct {
	Endpoint   string
	ClientID   string
	Secret     string     // with AuthMethodBasic or AuthMethodPost
	AuthMethod string     // AuthMethodBasic, AuthMethodPost or AuthMethodNone
	Form       url.Values // grant_type and the grant's parameters; the client's are added
}

// TokenAnswer is what a token endpoint answered, as sent: callers judge it
// (which fields they need, which error they report).
type TokenAnswer struct {
	Status          int
	AccessToken     string
	TokenType       string
	RefreshToken    string
	IssuedTokenType string
	Scope           string
	// ExpiresIn is expires_in as sent ("" when absent), a number or a
	// numeric string; Seconds reads it.
	ExpiresIn string
	// Code and Description are the OAuth error, when the server gave one.
	Code, Description string
	// NotJSON is why the body is not a JSON object (nil when it is).
	NotJSON error
}

// Seconds is expires_in in seconds, and whether it is a positive number.
func (a *TokenAnswer) Seconds() (int64, bool) {
	s := expiresIn(a.ExpiresIn).seconds()
	return s, s > 0
}

// UnreadableAnswerError is a token endpoint that answered, but whose body
// could not be read or exceeds MaxDocumentBytes.
type UnreadableAnswerError struct {
	Status int
	Err    error
}

func (e *UnreadableAnswerError) Error() string {
	return fmt.Sprintf("reading the answer (HTTP %d): %v", e.Status, e.Err)
}

func (e *UnreadableAnswerError) Unwrap() error { return e.Err }

// PostToken POSTs p to its token endpoint and reads the answer (bounded).
// The error is for no usable answer: the endpoint unreachable (net/http's
// error), or its body unreadable (*UnreadableAnswerError); any answer,
// whatever its status, is returned for the caller to judge.
func PostToken(ctx context.Context, hc *http.Client, p TokenPost) (*TokenAnswer, error) {
	form := url.Values{}
	for k, v := range p.Form {
		form[k] = v
	}
	if p.AuthMethod != AuthMethodBasic {
		form.Set("client_id", p.ClientID)
	}
	if p.AuthMethod == AuthMethodPost {
		form.Set("client_secret", p.Secret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if p.AuthMethod == AuthMethodBasic {
		// RFC 6749 section 2.3.1: form-encode both before Basic.
		req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(p.Secret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := readBounded(resp.Body)
	if err != nil {
		return nil, &UnreadableAnswerError{Status: resp.StatusCode, Err: err}
	}
	var tr struct {
		AccessToken     string    `json:"access_token"`
		TokenType       string    `json:"token_type"`
		RefreshToken    string    `json:"refresh_token"`
		IssuedTokenType string    `json:"issued_token_type"`
		ExpiresIn       expiresIn `json:"expires_in"`
		Scope           string    `json:"scope"`
		oauthError
	}
	a := &TokenAnswer{Status: resp.StatusCode}
	if err := decodeObject(b, &tr); err != nil {
		a.NotJSON = err
		return a, nil
	}
	a.AccessToken, a.TokenType, a.RefreshToken = tr.AccessToken, tr.TokenType, tr.RefreshToken
	a.IssuedTokenType, a.Scope, a.ExpiresIn = tr.IssuedTokenType, tr.Scope, string(tr.ExpiresIn)
	a.Code, a.Description = tr.Code, tr.Description
	return a, nil
}
