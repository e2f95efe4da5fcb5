package peruser

import (
	"context"
	"os"
)

// Seed stores t for principal as a completed flow would (tests).
func Seed(ctx context.Context, s *Source, principal string, t *Token) error {
	return s.tokens.put(ctx, s.newRecord(principal, t, nil))
}

// PrincipalName is principalName (tests).
func PrincipalName(key string) string { return principalName(key) }

// FailSyncs makes f's writes fail at the sync (tests).
func FailSyncs(f *FileBackend, err error) { f.sync = func(*os.File) error { return err } }
