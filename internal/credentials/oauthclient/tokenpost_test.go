package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestPostToken: where each client authentication puts the credentials,
// the form sent as given, and what comes back for the caller to judge.
func TestPostToken(t *testing.T) {
	var got *http.Request
	var gotForm url.Values
	answer := `{"access_token":"at","token_type":"Bearer","expires_in":"3600","scope":"a b","refresh_token":"rt"}`
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got, gotForm = r, r.PostForm
		w.WriteHeader(status)
		fmt.Fprint(w, answer)
	}))
	defer srv.Close()
	ctx := context.Background()
	post := func(method string) *TokenAnswer {
		t.Helper()
		a, err := PostToken(ctx, srv.Client(), TokenPost{Endpoint: srv.URL, ClientID: "c i", Secret: "s:1", AuthMethod: method,
			Form: url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"r"}}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, tc := range []struct {
		method             string
		basic              bool
		formID, formSecret string
	}{
		{AuthMethodBasic, true, "", ""},
		{AuthMethodPost, false, "c i", "s:1"},
		{AuthMethodNone, false, "c i", ""},
	} {
		a := post(tc.method)
		user, pass, basic := got.BasicAuth()
		if basic != tc.basic || (basic && (user != "c+i" || pass != "s%3A1")) {
			t.Errorf("%s: Basic %v %q %q", tc.method, basic, user, pass)
		}
		if gotForm.Get("client_id") != tc.formID || gotForm.Get("client_secret") != tc.formSecret || gotForm.Get("refresh_token") != "r" {
			t.Errorf("%s: form %v", tc.method, gotForm)
		}
		if secs, ok := a.Seconds(); a.AccessToken != "at" || a.RefreshToken != "rt" || a.Scope != "a b" || !ok || secs != 3600 {
			t.Errorf("%s: answer %+v", tc.method, a)
		}
	}

	status, answer = http.StatusBadRequest, `{"error":"invalid_grant","error_description":"gone"}`
	if a := post(AuthMethodNone); a.Status != 400 || a.Code != "invalid_grant" || a.Description != "gone" || a.NotJSON != nil {
		t.Errorf("refusal: %+v", a)
	}
	status, answer = http.StatusOK, `<html>`
	if a := post(AuthMethodNone); a.NotJSON == nil {
		t.Errorf("an HTML answer: %+v, want NotJSON", a)
	}
	answer = `{"access_token":"` + strings.Repeat("x", MaxDocumentBytes) + `"}`
	_, err := PostToken(ctx, srv.Client(), TokenPost{Endpoint: srv.URL, AuthMethod: AuthMethodNone})
	var ue *UnreadableAnswerError
	if !errors.As(err, &ue) || ue.Status != 200 || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an answer over the bound: %v", err)
	}
}
