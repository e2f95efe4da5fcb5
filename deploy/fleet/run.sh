#!/usr/bin/env bash
# A fleet on one machine, without containers: redis-server, three mcpgw
# replicas with one config (mcpgw.yaml) and one key ring, and HAProxy
# (haproxy.cfg) round robin in front on 127.0.0.1:8080. Ctrl-C stops all.
#
#   deploy/fleet/run.sh [path/to/mcpgw]
#
# Needs redis-server and haproxy (Debian: apt-get install redis-server
# haproxy). Try it: point any MCP client at http://127.0.0.1:8080/mcp; each
# answer's X-Served-By header names the replica that served it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$(command -v mcpgw || true)}"
[[ -x "$bin" ]] || { echo "usage: $0 path/to/mcpgw (go build -o mcpgw ./cmd/mcpgw)" >&2; exit 2; }
state="${MCPGW_FLEET_STATE:-$(mktemp -d)}"
export MCPGW_EXECUTABLE="$bin" MCPGW_REDIS="127.0.0.1:${REDIS_PORT:-6379}"
export MCPGW_SESSION_KEYS="$state/session-keys"
# The ring every replica shares: newest key first. To rotate, put a new
# key on top (keep the old), then `kill -HUP` each replica.
[[ -s "$MCPGW_SESSION_KEYS" ]] || { head -c 32 /dev/urandom | base64 >"$MCPGW_SESSION_KEYS"; chmod 600 "$MCPGW_SESSION_KEYS"; }

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM

redis-server --port "${REDIS_PORT:-6379}" --bind 127.0.0.1 --save '' --appendonly no --dir "$state" &
pids+=($!)
for i in 1 2 3; do
  MCPGW_LISTEN="127.0.0.1:808$i" MCPGW_ADMIN="127.0.0.1:909$i" \
    "$bin" run --config "$here/mcpgw.yaml" >"$state/r$i.log" 2>&1 &
  pids+=($!)
  export "MCPGW_R$i=127.0.0.1:808$i" "MCPGW_R${i}_ADMIN_PORT=909$i"
done
export MCPGW_LB="127.0.0.1:8080"
haproxy -db -f "$here/haproxy.cfg" &
pids+=($!)
echo "fleet up: http://$MCPGW_LB/mcp (replica logs and the key ring in $state)"
wait -n
