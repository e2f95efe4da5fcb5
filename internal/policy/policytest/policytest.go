// Package policytest writes the large policy that benchmarks and tests
// judge calls by: n rules the way a large deployment writes them (issue
// 18's "1,000-rule policy with CEL conditions"). It owns that shape, so
// that the policy package's decision benchmarks, the core's guarded call,
// the gateway's HTTP benchmark and the bench command's auth scenario all
// measure the same policy.
package policytest

import (
	"fmt"
	"strings"
)

// Large describes the policy: most rules grant one team (team<i>) its
// upstream's tools (up<i>__*) and deny its admin tools; every 20th grants
// one user (user<i>) more, and the one after opens a public resource tree
// to everyone.
type Large struct {
	Rules int
	// When gives every rule a CEL condition: on the principal's claims
	// (resource rules), its groups (user rules), or the call's arguments
	// and subject (team rules).
	When bool
	// Distinct makes every condition's text its rule's own, so that none
	// is compiled once for several rules.
	Distinct bool
	// GrantPrefix, when set, is the tool prefix that team rule Grant
	// grants instead of up<Grant>__ (the upstream a test calls).
	Grant       int
	GrantPrefix string
}

// YAML is the policy: section, default deny.
func (l Large) YAML() string {
	var b strings.Builder
	b.WriteString("policy:\n  default: deny\n  rules:\n")
	for i := range l.Rules {
		when := func(plain, distinct string) string {
			switch {
			case !l.When:
				return ""
			case l.Distinct:
				return ", when: '" + distinct + "'"
			}
			return ", when: '" + plain + "'"
		}
		switch {
		case i%20 == 19: // everyone: a public resource tree
			fmt.Fprintf(&b, "    - {allow: ['resource:fs+file:///pub%d/*']%s}\n", i,
				when(`principal.claims.?tenant.orValue("") == "acme"`, fmt.Sprintf(`principal.claims.?tenant.orValue("") == "acme%d"`, i)))
		case i%20 == 18: // one user
			fmt.Fprintf(&b, "    - {match: {subjects: [user%d]}, allow: ['up%d__*']%s}\n", i, i,
				when(`"admins" in principal.groups`, fmt.Sprintf(`"admins%d" in principal.groups`, i)))
		default: // one team
			prefix := fmt.Sprintf("up%d__", i)
			if l.GrantPrefix != "" && i == l.Grant {
				prefix = l.GrantPrefix
			}
			fmt.Fprintf(&b, "    - {match: {groups: [team%d]}, allow: ['%s*'], deny: ['%sadmin_*']%s}\n", i, prefix, prefix,
				when(`arguments.?limit.orValue(0) <= 100 && principal.subject != "blocked"`,
					fmt.Sprintf(`arguments.?limit.orValue(0) <= %d && principal.subject != "blocked"`, 100+i)))
		}
	}
	return b.String()
}
