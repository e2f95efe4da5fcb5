#!/usr/bin/env bash
# Runs the pinned conformance suite's CLIENT scenarios with mcpgw as the
# client under test: `conformance client --command "clientdriver ..."
# --requirements REV` for each requirement set. The suite starts a scenario
# server per scenario (all in parallel) and runs the driver with its URL;
# the driver (clientdriver/) starts mcpgw with that URL as its only upstream
# and makes the downstream traffic, so what the scenario server checks is
# mcpgw's upstream side. client-expected-failures.yml lists the checks mcpgw
# does not pass, each with its reason; the suite fails a run when a listed
# check passes, so the list stays exact.
#
# Each requirement set runs twice: with the driver speaking 2025-11-25 to
# the gateway (so every 2026-07-28 client behaviour comes from the gateway
# itself) and speaking 2026-07-28 (a 2026 caller's own _meta and headers
# through the gateway).
#
# The requirement sets do not include the identity scenarios (private_key_jwt,
# workload identity, Enterprise-Managed Authorization, DPoP), so each of
# those runs by name too (SCENARIOS), with each downstream revision.
#
# Usage: test/conformance/run-client.sh [extra conformance-CLI args...]
#        (with --scenario S or --suite S among them: one run of just that)
# Environment: REQUIREMENTS (default "2025-11-25 2026-07-28"), SCENARIOS
#              (the scenarios run by name besides; default the five identity
#              ones, "" for none), DOWNSTREAM
#              (the driver's revisions, default "2025-11-25 2026-07-28"), BASELINE
#              (expected-failures file; empty = strict), MCPGW_BIN (use this
#              binary instead of building ./cmd/mcpgw), RESULTS_DIR (where
#              the logs and per-scenario checks.json go; default a temporary
#              directory, printed at the end).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-client-conformance.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if [[ -n "${MCPGW_BIN:-}" ]]; then
  cp "$MCPGW_BIN" "$work/mcpgw"
else
  (cd "$repo" && go build -o "$work/mcpgw" ./cmd/mcpgw)
fi
(cd "$repo" && go build -o "$work/clientdriver" ./test/conformance/clientdriver)

# Install the pinned suite from the lockfile if it is missing or not the locked version.
pinned="$(node -e 'const l=require(process.argv[1]);console.log(l.packages["node_modules/@modelcontextprotocol/conformance"].version)' "$here/package-lock.json")"
installed="$(node -e 'try{console.log(require(process.argv[1]).version)}catch{console.log("")}' \
  "$here/node_modules/@modelcontextprotocol/conformance/package.json")"
if [[ "$installed" != "$pinned" ]]; then
  echo "run-client.sh: installing @modelcontextprotocol/conformance@$pinned with npm ci" >&2
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
cli=(node --import "$here/globsync-preload.mjs" "$here/node_modules/@modelcontextprotocol/conformance/dist/index.js")

baseline="${BASELINE-$here/client-expected-failures.yml}"
baseline_args=()
if [[ -n "$baseline" ]]; then
  [[ -f "$baseline" ]] || { echo "run-client.sh: BASELINE file not found: $baseline" >&2; exit 2; }
  baseline_args=(--expected-failures "$baseline")
fi
results="${RESULTS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/mcp-client-conformance.XXXXXX")}"
mkdir -p "$results"

runs=()
for a in "$@"; do
  case "$a" in --scenario | --scenario=* | --suite | --suite=*) runs=("") ;; esac
done
if [[ ${#runs[@]} -eq 0 ]]; then
  for r in ${REQUIREMENTS:-2025-11-25 2026-07-28}; do runs+=("--requirements $r"); done
  for sc in ${SCENARIOS-auth/client-credentials-jwt auth/wif-jwt-bearer auth/enterprise-managed-authorization auth/dpop auth/dpop-nonce}; do
    runs+=("--scenario $sc")
  done
fi

status=0
for down in ${DOWNSTREAM:-2025-11-25 2026-07-28}; do
for sel in "${runs[@]}"; do
  # shellcheck disable=SC2206 # sel is "--requirements REV" or empty, split on purpose
  sel_args=($sel)
  name="client-${sel#--requirements }"
  [[ "$sel" == --scenario* ]] && name="client-$(tr / - <<<"${sel#--scenario }")"
  [[ -z "$sel" ]] && name="client-custom"
  name="$name-downstream-$down"
  log="$results/$name.log"
  echo "=== conformance client ${sel} $* (mcpgw as the client; the driver speaks $down to it) ===" >&2
  rc=0
  (cd "$results" && "${cli[@]}" client --command "$work/clientdriver -mcpgw $work/mcpgw -downstream $down" "${sel_args[@]}" \
    ${baseline_args[@]+"${baseline_args[@]}"} -o "$results/$name" "$@") >"$log" 2>&1 || rc=$?
  if grep -q '=== SUITE SUMMARY ===' "$log"; then
    sed -n '/=== SUITE SUMMARY ===/,$p' "$log" | grep -v '^Total:' || true
  elif [[ "$sel" == --scenario* ]] && grep -q '^Test Results:' "$log"; then
    grep -E 'FAILURE|WARNING' "$log" || true
    sed -n '/^Test Results:/,$p' "$log"
  else
    cat "$log"
  fi
  rev=""
  [[ "$sel" == --requirements* ]] && rev="${sel#--requirements }"
  if [[ "$sel" == --scenario* ]]; then
    # A run by name prints the scenario's own result, no suite summary.
    verdict="FAILED"
    grep -q 'OVERALL: PASSED' "$log" && verdict="passed"
    echo "conformance (client ${sel}, downstream $down): $verdict"
  else
    node "$here/summary.mjs" "$log" "client ${sel:-$*}, downstream $down" "$baseline" "$rev" client
  fi
  if [[ $rc -ne 0 ]]; then
    echo "run-client.sh: conformance CLI exited $rc for 'client ${sel:-$*}', downstream $down (log: $log; each scenario's driver and mcpgw log: stderr.txt under $results/$name)" >&2
    status=1
  fi
done
done
echo "results: $results" >&2
exit "$status"
