#!/usr/bin/env bash
# Proves internal/credentials/oauthclient against the pinned conformance
# suite: `conformance client --command oauthprobe --requirements REV` for
# each requirement set, where oauthprobe (oauthprobe/) is a plain MCP client
# that authorizes with the library (no gateway in between). Only the auth/*
# scenarios are the probe's business (it makes no elicitation, SSE retry or
# tool-call traffic beyond list-and-call), so the run passes when every
# scored auth/* scenario of each set passes, and fails naming the ones
# that do not; the other scenarios' results are printed, not judged.
#
# The identity scenarios, which the requirement sets do not count, run by
# name after them (SCENARIOS) and must each pass.
#
# Usage: test/conformance/run-oauthprobe.sh
# Environment: REQUIREMENTS (default "2025-11-25 2026-07-28"), SCENARIOS
#              (default the five identity scenarios, "" for none), RESULTS_DIR
#              (where logs and per-scenario checks.json go; default a
#              temporary directory, printed at the end).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-oauthprobe.XXXXXX")"
trap 'rm -rf "$work"' EXIT
(cd "$repo" && go build -o "$work/oauthprobe" ./test/conformance/oauthprobe)

pinned="$(node -e 'const l=require(process.argv[1]);console.log(l.packages["node_modules/@modelcontextprotocol/conformance"].version)' "$here/package-lock.json")"
installed="$(node -e 'try{console.log(require(process.argv[1]).version)}catch{console.log("")}' \
  "$here/node_modules/@modelcontextprotocol/conformance/package.json")"
if [[ "$installed" != "$pinned" ]]; then
  echo "run-oauthprobe.sh: installing @modelcontextprotocol/conformance@$pinned with npm ci" >&2
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
cli=(node --import "$here/globsync-preload.mjs" "$here/node_modules/@modelcontextprotocol/conformance/dist/index.js")
results="${RESULTS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mcp-oauthprobe.XXXXXX")}"
mkdir -p "$results"

status=0
for rev in ${REQUIREMENTS:-2025-11-25 2026-07-28}; do
  log="$results/oauthprobe-$rev.log"
  want="$("${cli[@]}" list --requirements "$rev" | sed -n 's/^  - \(auth\/.*\)$/\1/p')"
  # The CLI exits non-zero for the non-auth scenarios the probe does not
  # serve; the auth/* lines of its summary are what is judged.
  (cd "$results" && "${cli[@]}" client --command "$work/oauthprobe" --requirements "$rev" -o "$results/$rev") >"$log" 2>&1 || true
  passed=0 failed=()
  for s in $want; do
    if grep -q "^✓ $s: " "$log"; then
      passed=$((passed + 1))
    else
      failed+=("$s")
    fi
  done
  echo "oauthprobe, requirements $rev: $passed/$(wc -w <<<"$want") auth scenarios pass" >&2
  if [[ ${#failed[@]} -gt 0 ]]; then
    printf '  failing: %s\n' "${failed[@]}" >&2
    status=1
  fi
done
for s in ${SCENARIOS-auth/client-credentials-jwt auth/wif-jwt-bearer auth/enterprise-managed-authorization auth/dpop auth/dpop-nonce}; do
  name="$(tr / - <<<"$s")"
  log="$results/oauthprobe-$name.log"
  rc=0
  (cd "$results" && "${cli[@]}" client --command "$work/oauthprobe" --scenario "$s" -o "$results/$name") >"$log" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]] && grep -q 'OVERALL: PASSED' "$log"; then
    echo "oauthprobe, $s: passed" >&2
  else
    echo "oauthprobe, $s: FAILED (log: $log)" >&2
    grep -E 'FAILURE|WARNING' "$log" >&2 || true
    status=1
  fi
done
echo "results: $results (each scenario's probe log: stderr.txt)" >&2
exit "$status"
