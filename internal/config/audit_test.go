package config_test

import (
	"reflect"
	"testing"

	"github.com/mcpgw/mcpgw/internal/config"
)

func TestAuditDefaults(t *testing.T) {
	if c := mustParse(t, "upstreams: {fs: {command: [x]}}\n", nil); c.Audit != nil {
		t.Errorf("no audit: section gave %+v, want nil (audit off)", c.Audit)
	}
	c := mustParse(t, "upstreams: {fs: {command: [x]}}\naudit: {include_arguments: true}\n", nil)
	want := &config.Audit{Output: config.AuditStdout, IncludeArguments: true, RedactFields: config.DefaultRedactFields}
	if !reflect.DeepEqual(c.Audit, want) {
		t.Errorf("defaults: got %+v, want %+v", c.Audit, want)
	}
	c = mustParse(t, "upstreams: {fs: {command: [x]}}\naudit: {output: stderr, redact_fields: []}\n", nil)
	if c.Audit.Output != config.AuditStderr || len(c.Audit.RedactFields) != 0 {
		t.Errorf("explicit: got %+v, want stderr and no redaction", c.Audit)
	}
	c, err := loadAll("testdata/audit.good.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want = &config.Audit{Output: "/var/log/mcpgw/audit.log", IncludeArguments: true, RedactFields: []string{"password", "api_key"}}
	if !reflect.DeepEqual(c.Audit, want) {
		t.Errorf("audit.good.yaml: got %+v, want %+v", c.Audit, want)
	}
}
