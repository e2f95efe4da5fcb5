package peruser

import "context"

// Seed stores t for principal as a completed flow would (tests).
func Seed(ctx context.Context, s *Source, principal string, t *Token) error {
	return s.tokens.put(ctx, s.newRecord(principal, t, nil))
}

// PrincipalName is principalName (tests).
func PrincipalName(key string) string { return principalName(key) }
