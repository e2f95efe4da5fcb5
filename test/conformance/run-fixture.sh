#!/usr/bin/env bash
# Builds the fixture server (test/fixture), starts it on a free loopback port
# and runs the pinned conformance suite against it directly with run.sh:
# `--suite all`, then each requirement set (2025-11-25, 2026-07-28).
# Exits non-zero if any run fails. Extra args go to every run.sh call.
#
# Usage: test/conformance/run-fixture.sh [extra conformance-CLI args...]
# Environment: RUNS (default "all 2025-11-25 2026-07-28"; "all" = --suite all),
#              BASELINE, RESULTS_DIR as for run.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/mcp-fixture.XXXXXX")"
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$repo" && go build -o "$work/fixture" ./test/fixture)
"$work/fixture" --http 127.0.0.1:0 2>"$work/fixture.log" &
pid=$!

# Wait (up to 10 s) for "listening on http://ADDR/mcp".
url=""
for _ in $(seq 100); do
  url="$(grep -o 'http://[^ ]*/mcp' "$work/fixture.log" || true)"
  [[ -n "$url" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/fixture.log" >&2; echo "run-fixture.sh: fixture exited" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$url" ]] || { cat "$work/fixture.log" >&2; echo "run-fixture.sh: fixture did not start" >&2; exit 1; }
echo "fixture listening on $url" >&2

status=0
for run in ${RUNS:-all 2025-11-25 2026-07-28}; do
  req="$run"
  [[ "$run" == "all" ]] && req=""
  results=""
  [[ -n "${RESULTS_DIR:-}" ]] && results="$RESULTS_DIR/$run"
  REQUIREMENTS="$req" RESULTS_DIR="$results" "$here/run.sh" "$url" "$@" || status=1
done
exit "$status"
