#!/usr/bin/env bash
# Runs the pinned official MCP conformance suite (@modelcontextprotocol/conformance,
# see package.json / package-lock.json) against a running MCP server's
# Streamable HTTP endpoint, and exits non-zero if any scenario fails
# unexpectedly.
#
# Usage:
#   test/conformance/run.sh URL [extra conformance-CLI args...]
#
#   URL                  e.g. http://127.0.0.1:8080/mcp (DNS-rebinding checks need a localhost URL)
#   extra args           passed to `conformance server`, e.g. --scenario tools-list,
#                        --verbose, --timeout 60000. If they include --suite, --scenario
#                        or --requirements, the default `--suite all` is not added.
#
# Environment:
#   REQUIREMENTS   unset/empty: run `--suite all` (every server scenario of the pinned suite).
#                  A revision, e.g. 2025-11-25 or 2026-07-28: run `--requirements REV`, i.e.
#                  exactly what that spec revision requires, at its own wire version.
#                  Several (space separated) or "both": one run per revision, in turn.
#   BASELINE       expected-failures file (default: expected-failures.yml beside this
#                  script, the scenarios the fixture on go-sdk cannot pass). Set BASELINE=
#                  (empty) to run strictly, failing on every failing scenario.
#   RESULTS_DIR    where the per-scenario checks.json files and the logs go
#                  (default: a new temporary directory, printed at the end).
#
# Output: the CLI's per-scenario summary, then per run one closing line
#   conformance: P passed, F failed, S skipped
# counting scenarios (skipped = failed but excused by BASELINE or not scored for
# the requirement set). Needs node >= 20.6 (the preload adds fs.globSync on Node 20).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ $# -lt 1 || "$1" == "-h" || "$1" == "--help" ]]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  [[ $# -lt 1 ]] && exit 2 || exit 0
fi
url="$1"
shift

# Install the pinned suite from the lockfile if it is missing or not the locked version.
pinned="$(node -e 'const l=require(process.argv[1]);console.log(l.packages["node_modules/@modelcontextprotocol/conformance"].version)' "$here/package-lock.json")"
installed="$(node -e 'try{console.log(require(process.argv[1]).version)}catch{console.log("")}' \
  "$here/node_modules/@modelcontextprotocol/conformance/package.json")"
if [[ "$installed" != "$pinned" ]]; then
  echo "run.sh: installing @modelcontextprotocol/conformance@$pinned with npm ci" >&2
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
cli=(node --import "$here/globsync-preload.mjs" "$here/node_modules/@modelcontextprotocol/conformance/dist/index.js")

baseline_args=()
baseline="${BASELINE-$here/expected-failures.yml}"
if [[ -n "$baseline" ]]; then
  [[ -f "$baseline" ]] || { echo "run.sh: BASELINE file not found: $baseline" >&2; exit 2; }
  baseline_args=(--expected-failures "$baseline")
fi

results="${RESULTS_DIR:-}"
if [[ -z "$results" ]]; then
  results="$(mktemp -d "${TMPDIR:-/tmp}/mcp-conformance.XXXXXX")"
fi
mkdir -p "$results"

# The runs to make: one per requirement set, or a single --suite all.
selects_itself=false
for a in "$@"; do
  case "$a" in --suite | --suite=* | --scenario | --scenario=* | --requirements | --requirements=*) selects_itself=true ;; esac
done
reqs="${REQUIREMENTS:-}"
[[ "$reqs" == "both" ]] && reqs="2025-11-25 2026-07-28"
runs=()
if [[ -n "$reqs" ]]; then
  for r in $reqs; do runs+=("--requirements $r"); done
elif $selects_itself; then
  runs+=("")
else
  runs+=("--suite all")
fi

status=0
for sel in "${runs[@]}"; do
  # shellcheck disable=SC2206 # sel is "--flag value" or empty, split on purpose
  sel_args=($sel)
  name="${sel// /-}"
  name="${name#--}"
  name="${name:-custom}"
  log="$results/$name.log"
  echo "=== conformance server --url $url ${sel} $* ===" >&2
  rc=0
  (cd "$results" && "${cli[@]}" server --url "$url" "${sel_args[@]}" ${baseline_args[@]+"${baseline_args[@]}"} \
    -o "$results/$name" "$@") >"$log" 2>&1 || rc=$?
  # Print the summary part of the CLI output (or all of it if there is none).
  if grep -q '=== SUMMARY ===' "$log"; then
    sed -n '/=== SUMMARY ===/,$p' "$log" | grep -v '^Total:' || true
  else
    cat "$log"
  fi
  rev=""
  [[ "$sel" == --requirements* ]] && rev="${sel#--requirements }"
  node "$here/summary.mjs" "$log" "${sel:-$*}" "$baseline" "$rev"
  if [[ $rc -ne 0 ]]; then
    echo "run.sh: conformance CLI exited $rc for '${sel:-$*}' (log: $log)" >&2
    status=1
  fi
done
echo "results: $results" >&2
exit "$status"
