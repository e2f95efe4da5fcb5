package mcp

import (
	"slices"
	"strings"
)

// Revision is one dated revision of the protocol. Revisions come in two
// families, and the gateway's words follow them: a session revision
// (2024-11-05 to 2025-11-25) starts with initialize and keeps what it
// negotiated in a session; a stateless revision (2026-07-28) has no
// initialize, and every request carries its revision and client
// capabilities in _meta. "Legacy" in mcpgw means only the 2024-11-05
// HTTP+SSE transport.
type Revision string

// The revisions mcpgw speaks, newest first.
const (
	Version20260728 Revision = "2026-07-28"
	Version20251125 Revision = "2025-11-25"
	Version20250618 Revision = "2025-06-18"
	Version20250326 Revision = "2025-03-26"
	Version20241105 Revision = "2024-11-05"
)

// SupportedVersions are the session revisions (initialize handshake)
// mcpgw speaks on both sides, newest first.
var SupportedVersions = []Revision{Version20251125, Version20250618, Version20250326, Version20241105}

// LatestVersion is the newest session revision: initialize's counter-offer.
const LatestVersion = Version20251125

// StatelessVersions are the stateless revisions mcpgw speaks.
var StatelessVersions = []Revision{Version20260728}

// AllVersions is every revision mcpgw speaks, newest first.
var AllVersions = append(slices.Clone(StatelessVersions), SupportedVersions...)

// Initializes reports whether r is a session revision mcpgw speaks: one
// negotiated by initialize.
func (r Revision) Initializes() bool { return slices.Contains(SupportedVersions, r) }

// Stateless reports whether r is a stateless revision mcpgw speaks.
func (r Revision) Stateless() bool { return slices.Contains(StatelessVersions, r) }

// AtLeast reports whether r is o or a later revision (revisions are dates
// written YYYY-MM-DD, which order as strings).
func (r Revision) AtLeast(o Revision) bool { return r != "" && r >= o }

func (r Revision) String() string { return string(r) }

// JoinRevisions lists revisions for a message: "2025-11-25, 2025-06-18".
func JoinRevisions(rs []Revision) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
