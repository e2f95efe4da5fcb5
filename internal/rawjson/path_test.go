package rawjson

import (
	"errors"
	"testing"
)

func TestGetSetPath(t *testing.T) {
	tests := []struct {
		name, in string
		path     []string
		get      string
		getErr   error
		set, out string
	}{
		{"top", `{"name":"a","x":1}`, []string{"name"}, "a", nil, "b", `{"name":"b","x":1}`},
		{"nested", `{"ref":{"type":"ref/resource", "uri":"u://1"}}`, []string{"ref", "uri"}, "u://1", nil, "v", `{"ref":{"type":"ref/resource", "uri":"v"}}`},
		{"missing", `{"ref":{}}`, []string{"x", "uri"}, "", ErrNoPath, "", ""},
		{"not a string", `{"name":1}`, []string{"name"}, "", ErrNotString, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := GetPath([]byte(tt.in), tt.path)
			if !errors.Is(err, tt.getErr) || got != tt.get {
				t.Fatalf("GetPath = %q, %v; want %q, %v", got, err, tt.get, tt.getErr)
			}
			if tt.out == "" {
				return
			}
			out, err := SetPath([]byte(tt.in), tt.path, tt.set)
			if err != nil || string(out) != tt.out {
				t.Fatalf("SetPath = %s, %v; want %s", out, err, tt.out)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		in   string
		path []string
		want string
		ok   bool
	}{
		{`{"a":{"b":[1, 2]}}`, []string{"a", "b"}, `[1, 2]`, true},
		{`{"a":{"b":null}}`, []string{"a", "b"}, `null`, true},
		{`{"a":1}`, nil, `{"a":1}`, true},
		{`{"a":{}}`, []string{"a", "b"}, ``, false},
		{`{"a":"x"}`, []string{"a", "b"}, ``, false},
	} {
		got, ok := Lookup([]byte(tc.in), tc.path)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("Lookup(%s, %v) = %s, %v; want %s, %v", tc.in, tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
