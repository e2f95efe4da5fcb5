#!/usr/bin/env bash
# Runs the README's commands as a newcomer would type them, in a fresh clone
# of this checkout, and fails when one does not work as written:
#   - the first command (`go run ./cmd/mcpgw run`) must serve the embedded
#     default on 127.0.0.1:8080 and stop on SIGTERM;
#   - the "Try it" block (marked <!-- readme-test: try-it -->) runs top to
#     bottom with bash, and what it prints must end with the block marked
#     <!-- readme-test: try-it output -->.
# The second top command (bash .ci/run) is CI itself, which calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# block MARKER prints the fenced block after the line "<!-- readme-test: MARKER -->".
block() {
  awk -v m="<!-- readme-test: $1 -->" '
    $0 == m { want = 1; next }
    want && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }
  ' README.md
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
git clone -q "$root" "$tmp/repo"
cp README.md "$tmp/repo/README.md" # the README under test, committed or not
cd "$tmp/repo"

port_free() { ! (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; }
port_free || { echo "readme: 127.0.0.1:8080 is in use; the README's commands need it" >&2; exit 1; }

echo "readme: the first command: go run ./cmd/mcpgw run"
top=$(sed -n '/^```sh$/,/^```$/{/^go run/p}' README.md | head -1 | sed 's/ *#.*//')
[[ "$top" == "go run ./cmd/mcpgw run" ]] || { echo "readme: the first command is no longer 'go run ./cmd/mcpgw run' ($top); update this test" >&2; exit 1; }
set -m # its own process group, as in a terminal, so ^C (here SIGTERM) reaches go run's child too
go run ./cmd/mcpgw run > "$tmp/top.log" 2>&1 &
pid=$!
set +m
for _ in $(seq 1 300); do
  curl -s -o /dev/null http://127.0.0.1:8080/mcp && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/top.log" >&2; echo "readme: go run ./cmd/mcpgw run exited" >&2; exit 1; }
  sleep 0.2
done
code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/mcp -H 'Content-Type: application/json' -H 'Accept: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"readme","version":"0"}}}')
[[ "$code" == 200 ]] || { cat "$tmp/top.log" >&2; echo "readme: initialize answered HTTP $code" >&2; exit 1; }
# go run's child is the gateway: signal the whole group, as a terminal's ^C would.
kill -TERM -- "-$pid"
wait "$pid" 2>/dev/null || true
for _ in $(seq 1 50); do port_free && break; sleep 0.2; done
port_free || { echo "readme: the gateway still listens after SIGTERM" >&2; exit 1; }

echo "readme: the Try it block"
block try-it > "$tmp/try.sh"
[[ -s "$tmp/try.sh" ]] || { echo "readme: no <!-- readme-test: try-it --> block" >&2; exit 1; }
want=$(block "try-it output")
got=$(bash -euo pipefail "$tmp/try.sh" 2> "$tmp/try.log") || { cat "$tmp/try.log" >&2; echo "readme: the Try it block failed" >&2; exit 1; }
for _ in $(seq 1 50); do port_free && break; sleep 0.2; done
port_free || { echo "readme: the Try it block left the gateway running (its kill %1 did not stop it)" >&2; exit 1; }
if [[ "$(printf '%s\n' "$got" | tail -n "$(printf '%s\n' "$want" | wc -l)")" != "$want" ]]; then
  echo "readme: the Try it block printed" >&2; printf '%s\n' "$got" >&2
  echo "readme: the README says it prints" >&2; printf '%s\n' "$want" >&2
  exit 1
fi
echo "readme: ok"
