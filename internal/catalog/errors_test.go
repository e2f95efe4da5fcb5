package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/internal/credentials"
	"github.com/mcpgw/mcpgw/internal/mcp"
)

// TestCredentialError: a caller's upstream credential failures reach the
// caller as what they are, wrapped or not — a needed authorization as
// URLElicitationRequiredError with the URL, an exchange refusal or another
// Source failure with its message — and other errors are left alone.
func TestCredentialError(t *testing.T) {
	are := &credentials.AuthorizationRequiredError{Upstream: "gh", URL: "https://mcp.example.com/oauth/upstream/gh/start?state=x", ElicitationID: "el-1"}
	ee := &credentials.ExchangeError{Upstream: "jira", TokenURL: "https://idp/token", Status: 400, Code: "invalid_grant", Description: "no"}
	ce := &credentials.CredentialError{Upstream: "gh", Err: errors.New("token store unreachable")}
	for _, tc := range []struct {
		name     string
		err      error
		code     int
		contains []string
		data     string
	}{
		{"authorization required", fmt.Errorf("POST x: %w", are), mcp.CodeURLElicitationRequired, []string{`upstream "gh" needs your authorization`, are.URL},
			`{"elicitations":[{"mode":"url","elicitationId":"el-1","url":"https://mcp.example.com/oauth/upstream/gh/start?state=x","message":` + quoted(are.Error()) + `}]}`},
		{"exchange refused", fmt.Errorf("initialize: %w", ee), mcp.CodeUpstreamUnavailable, []string{`upstream "jira"`, "invalid_grant: no"}, ""},
		{"other source failure", ce, mcp.CodeUpstreamUnavailable, []string{`upstream "gh"`, "token store unreachable"}, ""},
		{"not a credential error", errors.New("connection reset"), 0, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := credentialError(tc.err)
			if tc.code == 0 {
				if got != nil {
					t.Errorf("got %+v, want nil", got)
				}
				return
			}
			if got == nil || got.Code != tc.code {
				t.Fatalf("got %+v, want code %d", got, tc.code)
			}
			for _, w := range tc.contains {
				if !strings.Contains(got.Message, w) {
					t.Errorf("message %q lacks %q", got.Message, w)
				}
			}
			if tc.data != "" {
				var want, have any
				_ = json.Unmarshal([]byte(tc.data), &want)
				_ = json.Unmarshal(got.Data, &have)
				if fmt.Sprint(want) != fmt.Sprint(have) {
					t.Errorf("data %s, want %s", got.Data, tc.data)
				}
			}
		})
	}
}

func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
