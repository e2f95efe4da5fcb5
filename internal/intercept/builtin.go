package intercept

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"

	"github.com/mcpgw/mcpgw/internal/config"
)

// detector is a named pattern and its prefilter: a string without one
// of its needles, or with fewer digits than minDigits, cannot match, and
// is not run through the expression (most text has no "@" or "AKIA";
// these checks are memchr-fast, the expressions are not).
type detector struct {
	expr      string
	needles   []string
	minDigits int
	luhn      bool
}

// detectorOf is a named detector (config.RedactDetectors lists the names;
// a test checks both agree).
func detectorOf(name string) (detector, bool) {
	switch name {
	case "aws_access_key":
		return detector{expr: `AKIA[0-9A-Z]{16}`, needles: []string{"AKIA"}}, true
	case "private_key":
		return detector{expr: `-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`, needles: []string{"PRIVATE KEY-----"}}, true
	case "jwt":
		return detector{expr: `eyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{10,}`, needles: []string{"eyJ"}}, true
	case "github_token":
		return detector{expr: `(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})`, needles: []string{"gh"}}, true
	case "slack_token":
		return detector{expr: `xox[abposr]-[A-Za-z0-9-]{10,}`, needles: []string{"xox"}}, true
	case "openai_key":
		return detector{expr: `sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`, needles: []string{"sk-"}}, true
	case "email":
		return detector{expr: `[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`, needles: []string{"@"}}, true
	case "phone":
		return detector{expr: `(?:\+[1-9][0-9]{0,2}[ .-]?)?(?:\([0-9]{2,4}\)[ .-]?|\b[0-9]{2,4}[ .-])[0-9]{3,4}[ .-]?[0-9]{3,4}\b`, minDigits: 7}, true
	case "credit_card":
		return detector{expr: `\b[0-9](?:[ -]?[0-9]){12,18}\b`, minDigits: 13, luhn: true}, true
	}
	return detector{}, false
}

// worth reports whether s passes d's prefilter.
func (d *detector) worth(s []byte) bool {
	if len(d.needles) > 0 && !slices.ContainsFunc(d.needles, func(n string) bool { return bytes.Contains(s, []byte(n)) }) {
		return false
	}
	if d.minDigits > 0 {
		n := 0
		for _, c := range s {
			if c >= '0' && c <= '9' {
				if n++; n >= d.minDigits {
					return true
				}
			}
		}
		return false
	}
	return true
}

// matcher is the compiled patterns of one redact or deny_match.
type matcher struct {
	res []*regexp.Regexp
	det []detector // res[i]'s prefilter and Luhn check (zero: a plain pattern)
}

func newMatcher(ic *config.Interceptor) (*matcher, error) {
	m := &matcher{}
	add := func(d detector) error {
		expr := d.expr
		if msg := config.CheckInterceptPattern(expr); msg != "" {
			return fmt.Errorf("interceptor %s: pattern %q %s", ic.Name, expr, msg)
		}
		if ic.CaseInsensitive {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return fmt.Errorf("interceptor %s: %w", ic.Name, err)
		}
		m.res = append(m.res, re)
		m.det = append(m.det, d)
		return nil
	}
	for _, d := range ic.Detectors {
		det, ok := detectorOf(d)
		if !ok {
			return nil, fmt.Errorf("interceptor %s: unknown detector %q", ic.Name, d)
		}
		if ic.CaseInsensitive {
			det.needles = nil // the needles are case-sensitive
		}
		if err := add(det); err != nil {
			return nil, err
		}
	}
	for _, p := range ic.Patterns {
		if err := add(detector{expr: p}); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// spans appends the byte spans of s that match, in no order.
func (m *matcher) spans(dst [][2]int, s []byte) [][2]int {
	for i, re := range m.res {
		if !m.det[i].worth(s) {
			continue
		}
		for _, loc := range re.FindAllIndex(s, -1) {
			if m.det[i].luhn && !luhnOK(s[loc[0]:loc[1]]) {
				continue
			}
			dst = append(dst, [2]int{loc[0], loc[1]})
		}
	}
	return dst
}

// matches reports whether any pattern matches s.
func (m *matcher) matches(s []byte) bool {
	for i, re := range m.res {
		if !m.det[i].worth(s) {
			continue
		}
		if !m.det[i].luhn {
			if re.Match(s) {
				return true
			}
			continue
		}
		for _, loc := range re.FindAllIndex(s, -1) {
			if luhnOK(s[loc[0]:loc[1]]) {
				return true
			}
		}
	}
	return false
}

// redactor replaces every match in a string with the replacement,
// writing the new string straight into e's output.
type redactor struct {
	m     *matcher
	repl  []byte
	e     *editor
	spans [][2]int // scratch, reused across strings
}

func (r *redactor) apply(s []byte) bool {
	r.spans = r.m.spans(r.spans[:0], s)
	if len(r.spans) == 0 {
		return false
	}
	slices.SortFunc(r.spans, func(a, b [2]int) int { return a[0] - b[0] })
	e := r.e
	e.open()
	at := 0
	for _, sp := range r.spans {
		if sp[1] <= at {
			continue // inside a span already replaced
		}
		if sp[0] >= at {
			e.text(s[at:sp[0]])
			e.text(r.repl)
		}
		at = sp[1] // an overlap extends the replaced span
	}
	e.text(s[at:])
	e.close()
	return true
}

// luhnOK reports whether the digits of s pass the Luhn check (separators
// are skipped).
func luhnOK(s []byte) bool {
	sum, n := 0, 0
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if n%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
	}
	return n >= 13 && sum%10 == 0
}

// suspicious says why a definition's description looks like an
// instruction to the model rather than documentation ("" when it does
// not).
func suspicious(desc []byte, maxBytes int) string {
	if len(desc) > maxBytes {
		return fmt.Sprintf("description is %d bytes, over %d", len(desc), maxBytes)
	}
	for _, phrase := range [...]string{"ignore previous", "ignore all previous", "ignore the above", "disregard previous",
		"disregard all prior", "<important>", "system prompt", "do not tell the user", "don't tell the user"} {
		if containsFold(desc, phrase) {
			return fmt.Sprintf("description contains %q", phrase)
		}
	}
	for i := 0; i < len(desc); {
		r, n := utf8.DecodeRune(desc[i:])
		switch {
		case r >= 0xE0000 && r <= 0xE007F:
			return "description contains Unicode tag characters (hidden text)"
		case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2060 && r <= 0x2064, r >= 0x2066 && r <= 0x2069, r == 0xFEFF, r == 0x00AD:
			return fmt.Sprintf("description contains an invisible character U+%04X", r)
		}
		i += n
	}
	return ""
}

// containsFold is bytes.Contains ignoring ASCII case; phrase is lower case.
func containsFold(s []byte, phrase string) bool {
	n := len(phrase)
	for i := 0; i+n <= len(s); i++ {
		if s[i]|0x20 == phrase[0]|0x20 && bytes.EqualFold(s[i:i+n], []byte(phrase)) {
			return true
		}
	}
	return false
}
