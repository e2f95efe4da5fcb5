package principal

import "testing"

// Key's forms are stored (per-user token store keys, sealed session ids,
// stateful upstreams' owners), so they are spelled out here byte for
// byte: a change orphans every stored token at an upgrade.
func TestKeyIsStable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        *Principal
		key, str string
	}{
		{"nil", nil, "", "anonymous"},
		{"zero", &Principal{}, "", "anonymous"},
		{"groups alone name nobody", &Principal{Groups: []string{"eng"}}, "", "anonymous"},
		{"token", &Principal{Subject: "alice", Issuer: "https://idp", Groups: []string{"eng"}}, "oidc\x00https://idp\x00alice", "alice@https://idp"},
		{"api key", &Principal{Subject: "ci-bot", APIKey: "ci"}, "apikey\x00ci", "apikey:ci"},
		{"certificate", &Principal{Subject: "CN1", Certificate: "common_name"}, "cert\x00CN1", "cert:CN1"},
		// A token user named like an API key or a certificate is neither.
		{"token named ci", &Principal{Subject: "ci", Issuer: "https://idp"}, "oidc\x00https://idp\x00ci", "ci@https://idp"},
	} {
		if got := tc.p.Key(); got != tc.key {
			t.Errorf("%s: Key() = %q, want %q", tc.name, got, tc.key)
		}
		if got := tc.p.String(); got != tc.str {
			t.Errorf("%s: String() = %q, want %q", tc.name, got, tc.str)
		}
	}
}

func TestDescribe(t *testing.T) {
	for p, want := range map[*Principal]string{
		{}: "anonymous",
		{Subject: "alice", Issuer: "https://idp", Groups: []string{"eng", "ops"}}: "subject alice issuer https://idp groups eng,ops",
		{Subject: "ci-bot", APIKey: "ci", Scopes: []string{"a"}}:                  "subject ci-bot api key ci scopes a",
	} {
		if got := p.Describe(); got != want {
			t.Errorf("Describe() = %q, want %q", got, want)
		}
	}
}

// KeyOf reads what String writes (for tokens and API keys), and
// NameOfKey undoes it.
func TestKeyOfString(t *testing.T) {
	for _, p := range []*Principal{
		{Subject: "alice", Issuer: "https://login.example.com/"},
		{Subject: "a@b", Issuer: "http://idp"},
		{Subject: "ci-bot", APIKey: "ci"},
	} {
		key, err := KeyOf(p.String())
		if err != nil || key != p.Key() {
			t.Errorf("KeyOf(%q) = %q, %v; want %q", p.String(), key, err, p.Key())
		}
		if got := NameOfKey(key); got != p.String() {
			t.Errorf("NameOfKey(%q) = %q, want %q", key, got, p.String())
		}
	}
	for _, bad := range []string{"", "alice", "apikey:", "@https://x"} {
		if _, err := KeyOf(bad); err == nil {
			t.Errorf("KeyOf(%q) accepted", bad)
		}
	}
	if got := NameOfKey("cert\x00CN1"); got != "cert CN1" {
		t.Errorf("NameOfKey(cert) = %q", got)
	}
}

func TestBearerToken(t *testing.T) {
	var nilP *Principal
	if nilP.BearerToken() != "" {
		t.Error("nil principal has a bearer token")
	}
	p := &Principal{Subject: "alice", Issuer: "https://idp"}
	p.SetBearerToken("tok")
	if p.BearerToken() != "tok" {
		t.Error("bearer token not kept")
	}
	c := *p // a copy (the policy's value) keeps it: a call re-derived from it may exchange it
	if c.BearerToken() != "tok" {
		t.Error("copy lost the bearer token")
	}
}

func TestScopesAndGroups(t *testing.T) {
	var nilP *Principal
	p := &Principal{Scopes: []string{"a", "b"}, Groups: []string{"eng"}}
	if !p.HasScope("a") || p.HasScope("c") || nilP.HasScope("a") {
		t.Error("HasScope")
	}
	if got := p.MissingScopes([]string{"a", "c", "d"}); len(got) != 2 || got[0] != "c" || got[1] != "d" {
		t.Errorf("MissingScopes = %v", got)
	}
	if !p.InGroup("eng") || p.InGroup("ops") || nilP.InGroup("eng") {
		t.Error("InGroup")
	}
}

func TestClaimsConvertedOnce(t *testing.T) {
	c := NewClaims(map[string]any{"dept": "r"})
	s1, err := c.Struct()
	if err != nil || s1.Fields["dept"].GetStringValue() != "r" {
		t.Fatalf("Struct() = %v, %v", s1, err)
	}
	if s2, _ := c.Struct(); s2 != s1 {
		t.Error("claims converted twice")
	}
	if _, err := NewClaims(map[string]any{"f": func() {}}).Struct(); err == nil {
		t.Error("unconvertible claims accepted")
	}
}
