#!/usr/bin/env bash
# Runs every native Go fuzz target (func FuzzXxx in a _test.go file) for a
# bounded time each: FUZZTIME (default 8s) per target, one target at a
# time, as `go test -fuzz` allows. The corpus the fuzzer grows lives in the
# Go build cache ($(go env GOCACHE)/fuzz), so runs on one machine build on
# each other; an input that makes a target fail is written by Go to
# <package>/testdata/fuzz/<Target>/ — commit it with the fix, and it runs as
# a regular test case from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

fuzztime="${FUZZTIME:-8s}"
start=$SECONDS
targets=0
failed=()
while IFS=: read -r file _ decl; do
  name="$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$decl")"
  pkg="./$(dirname "${file#./}")"
  targets=$((targets + 1))
  printf -- '--> %s %s (%s)\n' "$pkg" "$name" "$fuzztime"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
    failed+=("$pkg $name")
  fi
done < <(grep -rn --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git -E '^func Fuzz[A-Za-z0-9_]*\(' . | sort)

echo "fuzz: $targets targets, ${fuzztime} each, $((SECONDS - start))s in all"
if ((targets == 0)); then
  echo "fuzz: no fuzz targets found"; exit 1
fi
if ((${#failed[@]} > 0)); then
  echo "fuzz: failing targets (the inputs are under each package's testdata/fuzz/):"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
