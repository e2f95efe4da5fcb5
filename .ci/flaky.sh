#!/usr/bin/env bash
# Measures how flaky a suite is before it is submitted (not a CI step):
# runs `go test -race -count=N` of the given packages while LOAD busy
# processes share the CPU, as on the 2-core CI machine with other jobs,
# then prints each failing test with how many of its runs failed.
#
#   .ci/flaky.sh [-count N] [-load L] [-run REGEXP] [-timeout D] PACKAGE...
#   .ci/flaky.sh -count 5 -load 2 ./internal/... ./test/...
#
# -count (default 5) runs each test N times; -load (default 2) starts L
# busy processes (`yes > /dev/null`), owned by this script and killed when
# it exits, however it exits; -run (default all) picks tests as go test's
# -run does; -timeout (default 30m) is go test's. The failures are counted
# from `go test -json` (a package that fails to build, or a test binary
# that panics or times out, is listed as <package> [package]). The exit
# status is 1 when any test failed, 0 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

count=5 load=2 run="" timeout=30m
usage() { sed -n '7,8p' "$0" | sed 's/^# *//' >&2; exit 2; }
while (($# > 0)); do
  case "$1" in
    -count) count="${2:?}"; shift 2 ;;
    -load) load="${2:?}"; shift 2 ;;
    -run) run="${2:?}"; shift 2 ;;
    -timeout) timeout="${2:?}"; shift 2 ;;
    -h | -help | --help) usage ;;
    -*) echo "flaky: unknown flag $1" >&2; usage ;;
    *) break ;;
  esac
done
(($# > 0)) || usage
[[ "$count" =~ ^[1-9][0-9]*$ && "$load" =~ ^[0-9]+$ ]] || { echo "flaky: -count and -load take whole numbers" >&2; exit 2; }
command -v jq >/dev/null || { echo "flaky: needs jq (apt-get install jq)" >&2; exit 2; }

pids=()
out="$(mktemp)"
cleanup() {
  # Only the processes this script started, by their ids.
  ((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null || true
  rm -f "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < load; i++)); do
  yes >/dev/null &
  pids+=($!)
done

args=(-race -count="$count" -timeout="$timeout" -json)
[[ -z "$run" ]] || args+=(-run "$run")
echo "flaky: go test ${args[*]} $* with $load busy processes" >&2
start=$SECONDS
status=0
go test "${args[@]}" "$@" >"$out" 2>&1 || status=$?
elapsed=$((SECONDS - start))

# Per test: runs that ended pass/fail; a package-level fail with no test
# is a build failure, a panic or a timeout.
report="$(jq -rR '
  fromjson? | select(.Action == "pass" or .Action == "fail")
  | [.Package, (.Test // "[package]"), .Action] | @tsv' "$out" |
  awk -F'\t' '
    { key = $1 "\t" $2; runs[key]++
      if ($3 == "fail") { fails[key]++; if ($2 != "[package]") testfailed[$1] = 1 } }
    END {
      for (k in fails) {
        split(k, p, "\t")
        # A package fails with any of its tests: listed only when none did.
        if (p[2] == "[package]" && p[1] in testfailed) continue
        # A subtest fails its parent too: both are listed.
        printf "%d/%d\t%s %s\n", fails[k], runs[k], p[1], p[2]
      }
    }' | sort -t/ -k1,1nr)"
# Lines go test printed that are not JSON (a build error) are shown as is.
grep -v '^{' "$out" | head -50 >&2 || true

if [[ -z "$report" ]]; then
  echo "flaky: no failures (${count} runs each, ${elapsed}s)"
  ((status == 0)) || { echo "flaky: go test exited $status with no failing test (see above)" >&2; exit 1; }
  exit 0
fi
echo "flaky: failing tests, failed/runs (${count} runs each, ${elapsed}s):"
printf '%s\n' "$report" | sed 's/^/  /'
# What each failing test said in the runs that failed (its output from
# "=== RUN" to "--- FAIL", at most 40 lines a test), so a flake seen once
# need not be reproduced to be understood.
printf '%s\n' "$report" | cut -f2 | while read -r pkg test; do
  [[ "$test" != "[package]" ]] || continue
  echo "--- $pkg $test"
  jq -rR --arg p "$pkg" --arg t "$test" '
    fromjson? | select(.Action == "output" and .Package == $p and .Test == $t) | .Output' "$out" |
    awk '/^=== RUN/ { chunk = "" } { chunk = chunk $0 "\n" } /^ *--- FAIL/ { printf "%s", chunk; chunk = "" }' |
    head -40 | sed 's/^/    /'
done
exit 1
