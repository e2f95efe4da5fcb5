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
# busy worker (golang/go#75804). Such a failure, with no new input under
# testdata/fuzz/, is reported as a flake and does not fail the step; any
# other failure does. FUZZ_MATCH (a regular expression) picks targets by name.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

fuzztime="${FUZZTIME:-8s}"
match="${FUZZ_MATCH:-.}"
start=$SECONDS
targets=0
failed=()
flaked=()
out="$(mktemp)"
inputs() { if [[ -d "$1" ]]; then find "$1" -type f | wc -l; else echo 0; fi; }
trap 'rm -f "$out"' EXIT
while IFS=: read -r file _ decl; do
  name="$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$decl")"
  [[ "$name" =~ $match ]] || continue
  dir="$(dirname "${file#./}")"
  corpus="$dir/testdata/fuzz/$name"
  targets=$((targets + 1))
  before="$(inputs "$corpus")"
  printf -- '--> ./%s %s (%s)\n' "$dir" "$name" "$fuzztime"
  if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./$dir" 2>&1 | tee "$out"; then
    continue
  fi
  after="$(inputs "$corpus")"
  if ((after == before)) && grep -q '^    context deadline exceeded$' "$out"; then
    echo "fuzz: $name: the coordinator's deadline race (golang/go#75804), no failing input: a flake"
    flaked+=("./$dir $name")
  else
    failed+=("./$dir $name")
  fi
done < <(grep -rn --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git -E '^func Fuzz[A-Za-z0-9_]*\(' . | sort)

echo "fuzz: $targets targets, ${fuzztime} each, $((SECONDS - start))s in all; ${#flaked[@]} deadline flakes"
if ((targets == 0)); then
  echo "fuzz: no fuzz targets found"; exit 1
fi
if ((${#failed[@]} > 0)); then
  echo "fuzz: failing targets (their inputs are under each package's testdata/fuzz/):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
