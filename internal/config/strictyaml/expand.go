package strictyaml

import (
	"fmt"
	"strings"
)

// expandVars replaces ${NAME} with the variable's value and ${NAME:-default}
// with the value, or default when the variable is unset or empty (as in a
// shell). "$$" is a literal "$". The default is taken literally, and values
// are never expanded again, so a variable cannot smuggle in another
// reference. It returns one message per reference it could not expand.
func expandVars(s string, lookup func(string) (string, bool)) (string, []string) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	var errs []string
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "$"):
			b.WriteByte('$')
			s = rest[1:]
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				errs = append(errs, "${ is not closed; write ${NAME} or ${NAME:-default}, or $$ for a literal $")
				return "", errs
			}
			ref := rest[1:end]
			s = rest[end+1:]
			if strings.HasPrefix(ref, "principal.") {
				// Not the environment's: the caller's, filled per request
				// where a setting takes it (tool curation's parameter values).
				b.WriteString("${" + ref + "}")
				continue
			}
			name, def, hasDef := strings.Cut(ref, ":-")
			if !validVarName(name) {
				errs = append(errs, fmt.Sprintf("${%s} is not a variable reference; write ${NAME} or ${NAME:-default} where NAME is letters, digits and _, or $$ for a literal $", ref))
				continue
			}
			val, ok := lookup(name)
			switch {
			case ok && (val != "" || !hasDef):
				b.WriteString(val)
			case hasDef:
				b.WriteString(def)
			default:
				errs = append(errs, fmt.Sprintf("environment variable %s is not set; export it, or give a default with ${%s:-default}", name, name))
			}
		default:
			// The message does not quote the text: a "$" may sit inside a secret.
			errs = append(errs, `a "$" must start ${NAME} (braces required, $NAME is not expanded); write $$ for a literal $`)
			s = rest
		}
	}
	return b.String(), errs
}

// validVarName reports whether s is a shell-style variable name.
func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
