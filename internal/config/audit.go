package config

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mcpgw/mcpgw/internal/config/strictyaml"
)

// This file holds the audit: section (types, defaults and validation);
// internal/audit writes the records.

// Audit outputs besides a file path.
const (
	AuditStdout = "stdout"
	AuditStderr = "stderr"
)

// DefaultRedactFields are the argument fields replaced by "[redacted]" when
// include_arguments is on and redact_fields is absent. An explicit
// "redact_fields: []" redacts nothing.
var DefaultRedactFields = []string{
	"password", "passwd", "secret", "client_secret", "token", "access_token",
	"refresh_token", "api_key", "apikey", "authorization", "cookie", "private_key",
}

// Audit is the audit log: one structured record per tool call, prompt get,
// resource read and per refused request, on a sink of its own.
type Audit struct {
	// Output is stdout, stderr or a file path (appended to, created 0600
	// if missing; relative to the config file's directory). Default stdout.
	Output string `yaml:"output"`
	// IncludeArguments adds the call's raw arguments (after redaction) to
	// each record; otherwise only their SHA-256 hash is recorded.
	IncludeArguments bool `yaml:"include_arguments"`
	// RedactFields are JSON field names (matched case-insensitively, at any
	// depth) whose values are replaced by "[redacted]" in recorded
	// arguments. Default DefaultRedactFields.
	RedactFields []string `yaml:"redact_fields"`
}

func auditDefaults(c *Config, d *strictyaml.Decoder) {
	a := c.Audit
	if a == nil {
		return
	}
	if !d.Set("audit.output") {
		a.Output = AuditStdout
	}
	if !d.Set("audit.redact_fields") {
		a.RedactFields = append([]string(nil), DefaultRedactFields...)
	}
}

func (v *validator) audit() {
	a := v.cfg.Audit
	if a == nil {
		return
	}
	switch out := a.Output; {
	case out == AuditStdout || out == AuditStderr:
	case out == "":
		v.add("audit.output", "is empty; set stdout, stderr or an absolute file path such as /var/log/mcpgw/audit.log")
	case strings.EqualFold(out, AuditStdout) || strings.EqualFold(out, AuditStderr) || out == "-":
		v.add("audit.output", fmt.Sprintf("%q is not an output; write stdout or stderr in lower case, or an absolute file path", out))
	case !filepath.IsAbs(out):
		v.add("audit.output", fmt.Sprintf("%q is a relative path, which would depend on the working directory; write an absolute path such as /var/log/mcpgw/audit.log, or stdout or stderr", out))
	case strings.HasSuffix(out, "/") || strings.HasSuffix(out, string(filepath.Separator)):
		v.add("audit.output", fmt.Sprintf("%q names a directory; name the file, e.g. %s", out, filepath.Join(out, "audit.log")))
	}
	seen := map[string]int{}
	for i, f := range a.RedactFields {
		p := fmt.Sprintf("audit.redact_fields[%d]", i)
		if strings.TrimSpace(f) == "" {
			v.add(p, "is empty; give a JSON field name such as password, or remove the entry")
			continue
		}
		if j, dup := seen[strings.ToLower(f)]; dup {
			v.add(p, fmt.Sprintf("%q repeats audit.redact_fields[%d] (names match case-insensitively); remove one", f, j))
			continue
		}
		seen[strings.ToLower(f)] = i
	}
}
