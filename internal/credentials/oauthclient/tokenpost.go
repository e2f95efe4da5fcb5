package oauthclient

import (
	"context"
	"errors"
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
	AuthMethod string     // AuthMethodBasic, AuthMethodPost, AuthMethodNone or AuthMethodPrivateKeyJWT
	Form       url.Values // grant_type and the grant's parameters; the client's are added
	// Assertion signs a fresh private_key_jwt client assertion (with
	// AuthMethodPrivateKeyJWT), once per request sent.
	Assertion func() (string, error)
	// DPoP, when set, puts a proof of its key on the request (the token
	// issued is then bound to it) and answers a use_dpop_nonce refusal
	// with one retry carrying the server's nonce.
	DPoP *DPoPKey
}

// AuthMethodPrivateKeyJWT authenticates with a JWT signed by the client's
// key (RFC 7523 section 2.2).
const AuthMethodPrivateKeyJWT = "private_key_jwt"

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
	// nonceNew: the answer carried a DPoP nonce not sent before.
	nonceNew bool
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
	a, err := postToken(ctx, hc, p)
	if err == nil && p.DPoP != nil && a.Status == http.StatusBadRequest && a.Code == "use_dpop_nonce" && a.nonceNew {
		// RFC 9449 section 8: the server wants its nonce in the proof;
		// once, so a server that keeps refusing cannot loop us.
		return postToken(ctx, hc, p)
	}
	return a, err
}

func postToken(ctx context.Context, hc *http.Client, p TokenPost) (*TokenAnswer, error) {
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
	if p.AuthMethod == AuthMethodPrivateKeyJWT {
		if p.Assertion == nil {
			return nil, errors.New("private_key_jwt without a key to sign with")
		}
		ca, err := p.Assertion()
		if err != nil {
			return nil, err
		}
		form.Set("client_assertion_type", ClientAssertionType)
		form.Set("client_assertion", ca)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if p.DPoP != nil {
		proof, err := p.DPoP.Proof(http.MethodPost, p.Endpoint, "")
		if err != nil {
			return nil, err
		}
		req.Header.Set("DPoP", proof)
	}
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
	if p.DPoP != nil {
		a.nonceNew = p.DPoP.SetNonce(p.Endpoint, resp.Header.Get("DPoP-Nonce"))
	}
	if err := decodeObject(b, &tr); err != nil {
		a.NotJSON = err
		return a, nil
	}
	a.AccessToken, a.TokenType, a.RefreshToken = tr.AccessToken, tr.TokenType, tr.RefreshToken
	a.IssuedTokenType, a.Scope, a.ExpiresIn = tr.IssuedTokenType, tr.Scope, string(tr.ExpiresIn)
	a.Code, a.Description = tr.Code, tr.Description
	return a, nil
}
