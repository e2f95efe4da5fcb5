#!/usr/bin/env bash
# Runs the pinned conformance suite against mcpgw fronting the fixture server
# (test/fixture) on an unprefixed route, once with the fixture as a stdio
# child and once over Streamable HTTP. The gateway is held to the fixture's
# own results: gateway-expected-failures.yml lists what the gateway does not
# pass yet (on top of the fixture's expected-failures.yml); the suite fails a
# run when a listed scenario starts passing, so the list stays exact.
#
# Usage: test/conformance/run-gateway.sh
# Environment: EXTRA_BASELINE (another expected-failures file to add),
#              FIXTURE_ARGS (extra fixture flags, e.g. "--protocol-version 2025-11-25"
#              to front a legacy fixture and exercise bridging), UPSTREAM_OPTIONS
#              (one more YAML line for the upstream, e.g. "exact_capabilities: true"), MCPGW_BIN (use this binary instead of building ./cmd/mcpgw), TRANSPORTS (default "stdio http"), RUNS (default "all 2025-11-25 2026-07-28";
#              "all" = --suite all), RESULTS_DIR as for run.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-conformance.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

if [[ -n "${MCPGW_BIN:-}" ]]; then
  cp "$MCPGW_BIN" "$work/mcpgw"
else
  (cd "$repo" && go build -o "$work/mcpgw" ./cmd/mcpgw)
fi
(cd "$repo" && go build -o "$work/fixture" ./test/fixture)
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# Wait for a log line matching $2 in file $1 (pid $3), up to 15 s.
wait_for() {
  for _ in $(seq 150); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || { cat "$1" >&2; echo "run-gateway.sh: process exited" >&2; return 1; }
    sleep 0.1
  done
  cat "$1" >&2
  echo "run-gateway.sh: timed out waiting for '$2'" >&2
  return 1
}

# The baseline: every file's "  - scenario" lines under one server: key
# (server: [] when there are none; a file may say server: [] itself).
baseline="$work/baseline.yml"
entries="$(cat "$here/expected-failures.yml" "$here/gateway-expected-failures.yml" ${EXTRA_BASELINE:+"$EXTRA_BASELINE"} | grep '^  - ' || true)"
if [[ -n "$entries" ]]; then
  printf 'server:\n%s\n' "$entries" > "$baseline"
else
  echo 'server: []' > "$baseline"
fi

status=0
for transport in ${TRANSPORTS:-stdio http}; do
  if [[ "$transport" == http ]]; then
    # shellcheck disable=SC2086 # FIXTURE_ARGS is a list of flags
    "$work/fixture" --http 127.0.0.1:0 ${FIXTURE_ARGS:-} 2>"$work/fixture.log" &
    pids+=($!)
    wait_for "$work/fixture.log" 'listening on http://' "$!"
    fixture_url="$(grep -o 'http://[^ ]*/mcp' "$work/fixture.log" | head -1)"
    upstream="url: $fixture_url"
  else
    args=""
    for a in ${FIXTURE_ARGS:-}; do args="$args, \"$a\""; done
    upstream="command: [\"$work/fixture\", \"--stdio\"$args]"
  fi
  run_baseline="$baseline"
  port="$(free_port)"
  cat >"$work/gateway-$transport.yaml" <<YAML
listen: 127.0.0.1:$port
upstreams:
  fixture:
    $upstream
    forward_roots: true   # the suite's roots scenarios expect the client's roots
${UPSTREAM_OPTIONS:+    $UPSTREAM_OPTIONS}
routes:
  - path: /mcp
    upstreams: [fixture]
    prefix: false
YAML
  "$work/mcpgw" run -c "$work/gateway-$transport.yaml" --log-level warn 2>"$work/gateway-$transport.log" &
  gw=$!
  pids+=($gw)
  # Ready when initialize answers 200.
  for _ in $(seq 150); do
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://localhost:$port/mcp" -H 'Content-Type: application/json' \
      -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}' || true)"
    [[ "$code" == 200 ]] && break
    kill -0 "$gw" 2>/dev/null || { cat "$work/gateway-$transport.log" >&2; exit 1; }
    sleep 0.1
  done
  for run in ${RUNS:-all 2025-11-25 2026-07-28}; do
    req="$run"
    [[ "$run" == "all" ]] && req=""
    results=""
    [[ -n "${RESULTS_DIR:-}" ]] && results="$RESULTS_DIR/$transport-$run"
    echo "### gateway over $transport upstream, run: $run" >&2
    BASELINE="$run_baseline" REQUIREMENTS="$req" RESULTS_DIR="$results" "$here/run.sh" "http://localhost:$port/mcp" || status=1
  done
  kill "$gw"; wait "$gw" 2>/dev/null || true
done
if [[ $status -ne 0 ]]; then
  echo "run-gateway.sh: gateway logs:" >&2
  tail -n 50 "$work"/gateway-*.log >&2
fi
exit "$status"
