#!/usr/bin/env bash
# Runs every native Go fuzz target (func FuzzXxx in a _test.go file) for a
# bounded time each: FUZZTIME (default 8s) per target, one target at a
# time, as `go test -fuzz` allows. The corpus the fuzzer grows lives in the
# Go build cache ($(go env GOCACHE)/fuzz), so runs on one machine build on
# each other; an input that makes a target fail is written by Go to
# <package>/testdata/fuzz/<Target>/ — commit it with the fix, and it runs as
# a regular test case from then on.
#
# Go's fuzz coordinator (up to Go 1.26) may end a duration-bounded run with
# a bare "context deadline exceeded" and no input when the deadline races a
# busy worker (golang/go#75804). The step tells that from a genuine failure
# by what the run left, not by its message: a failure the fuzzer found is
# written as a new file under testdata/fuzz/<Target>/, and the step fails
# naming it. A failure with no new input is run once more, bounded by a
# count of executions (-fuzztime FUZZRERUN, default 20000x) instead of a
# duration: the coordinator then has no deadline to race, so that run's
# verdict stands (a broken seed corpus or build fails it too). FUZZ_MATCH
# (a regular expression) picks targets by name.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

fuzztime="${FUZZTIME:-8s}"
rerun="${FUZZRERUN:-20000x}"
match="${FUZZ_MATCH:-.}"
start=$SECONDS
targets=0
failed=()
flaked=()
# inputs lists the files of a target's corpus directory, one a line.
inputs() { if [[ -d "$1" ]]; then find "$1" -type f | sort; fi; }
while IFS=: read -r file _ decl; do
  name="$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$decl")"
  [[ "$name" =~ $match ]] || continue
  dir="$(dirname "${file#./}")"
  corpus="$dir/testdata/fuzz/$name"
  targets=$((targets + 1))
  before="$(inputs "$corpus")"
  printf -- '--> ./%s %s (%s)\n' "$dir" "$name" "$fuzztime"
  if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./$dir" </dev/null; then
    continue
  fi
  found="$(comm -13 <(printf '%s\n' "$before") <(inputs "$corpus") | grep . || true)"
  if [[ -n "$found" ]]; then
    echo "fuzz: $name: failing input written: $found"
    failed+=("./$dir $name")
    continue
  fi
  echo "fuzz: $name failed with no new input: once more for $rerun executions, with no deadline to race (golang/go#75804)"
  if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$rerun" "./$dir" </dev/null; then
    flaked+=("./$dir $name")
  else
    failed+=("./$dir $name")
  fi
done < <(grep -rn --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git -E '^func Fuzz[A-Za-z0-9_]*\(' . | sort)

echo "fuzz: $targets targets, ${fuzztime} each, $((SECONDS - start))s in all; ${#flaked[@]} failed with no input and passed a count-bounded rerun (the deadline race)"
((${#flaked[@]} == 0)) || printf '  %s\n' "${flaked[@]}"
if ((targets == 0)); then
  echo "fuzz: no fuzz targets found"; exit 1
fi
if ((${#failed[@]} > 0)); then
  echo "fuzz: failing targets (their inputs are under each package's testdata/fuzz/):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
