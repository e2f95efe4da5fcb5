#!/usr/bin/env bash
# Interop test: real npm MCP servers (server-everything, server-filesystem,
# server-memory) run as stdio children of mcpgw; the official TypeScript SDK
# client connects to mcpgw over Streamable HTTP and lists/calls through it
# (client.test.mjs), and checks what flows during and around calls: progress,
# sampling, elicitation, resource subscriptions (fidelity.test.mjs). The SDK v2
# client (@modelcontextprotocol/client), pinned to the stateless 2026-07-28
# revision, does the same through the gateway's bridge to the legacy upstream:
# input_required rounds for sampling/elicitation, -32021, subscriptions/listen
# (stateless.test.mjs). The other way round, a 2026-07-28-only upstream built
# on the SDK v2 server package (servers/modern-server.mjs, route /mcp/modern,
# protocol: "2026") serves the v1 client as a legacy session: input_required
# becomes sampling/elicitation/roots requests on the call's stream,
# resources/subscribe becomes subscriptions/listen, logging/setLevel a
# per-request _meta log level (modern-upstream.test.mjs). What a real host
# does behind one prefixed route of five npm servers, two of them MCP Apps
# examples (route /mcp/hosts): one tools/list, the Inspector CLI's tools/list,
# ui:// app documents, resource_link reads, bare tool names (hosts.test.mjs).
# The v1 client's
# experimental tasks API drives server-everything's simulate-research-query
# through the gateway to a completed result, its elicitation coming on the
# tasks/result stream (tasks.test.mjs). In search mode (route /mcp/search)
# the SDK client and the Inspector CLI find tools and call them
# (toolsearch.test.mjs). On a curated route (/mcp/curated) both see the
# tools as the administrator chose: renamed, re-described, parameters fixed,
# hidden or defaulted, every other byte the upstream's (curation.test.mjs).
# A host that launches stdio servers spawns
# `mcpgw stdio` itself and initializes at once: its first answer carries the
# still-starting server-everything's capabilities and instructions
# (stdio-host.test.mjs). With the gateway as authorization server (login:),
# the SDK v1 and v2 clients and mcp-remote, knowing only a route's URL,
# register, sign in through the test OP and the gateway's consent page with
# a scripted browser (browser.mjs), and list and call (login.test.mjs).
# Interceptors: a gateway of its own (started from MCPGW_BIN) redacts an AWS
# key and an e-mail from server-everything's echo, byte for byte as the same
# call without interceptors but for those spans, and a deny_match refuses a
# call that never reaches the upstream (intercept.test.mjs).
#
#   test/interop/run.sh            # from anywhere; needs go, node >= 20, npm, curl
#
# Env knobs:
#   MCPGW_BIN=/path/to/mcpgw   use this binary instead of building ./cmd/mcpgw
#   INTEROP_KEEP=1             keep the temp dir (config, logs) after the run
#   READY_TIMEOUT=30           seconds to wait for the gateway to answer initialize
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ready_timeout="${READY_TIMEOUT:-30}"

log() { printf '[interop] %s\n' "$*" >&2; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-interop.XXXXXX")"
gw_pid=""
gw_log="$tmp/mcpgw.log"
status=1

dump_log() {
  if [[ -s "$gw_log" ]]; then
    log "---- mcpgw log ($gw_log) ----"
    cat "$gw_log" >&2
    log "---- end of mcpgw log ----"
  fi
}

# stop_gateway sends SIGTERM to the gateway we started (only that pid), waits up
# to 10 s, then SIGKILL. It reports stdio children that outlive the gateway.
orphans=""
stop_gateway() {
  [[ -n "$gw_pid" ]] || return 0
  local children
  children="$(pgrep -P "$gw_pid" || true)"
  if kill -0 "$gw_pid" 2>/dev/null; then
    kill -TERM "$gw_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$gw_pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$gw_pid" 2>/dev/null; then
      log "mcpgw (pid $gw_pid) ignored SIGTERM for 10 s; sending SIGKILL"
      kill -KILL "$gw_pid" 2>/dev/null || true
    fi
  fi
  wait "$gw_pid" 2>/dev/null || true
  gw_pid=""
  # Children get a moment to notice their stdin closed / their group was signalled.
  orphans=""
  for _ in $(seq 1 30); do
    orphans=""
    for c in $children; do
      if kill -0 "$c" 2>/dev/null; then orphans+=" $c"; fi
    done
    [[ -z "$orphans" ]] && break
    sleep 0.1
  done
  if [[ -n "$orphans" ]]; then
    log "upstream children outlived mcpgw:$orphans"
    local list
    list="$(echo $orphans | tr ' ' ',')"
    ps -o pid,ppid,pgid,args -p "$list" >&2 || true
    # They were started (by mcpgw) for this run only; do not leave them behind.
    # shellcheck disable=SC2086
    kill -KILL $orphans 2>/dev/null || true
  fi
}

cleanup() {
  local rc=$?
  stop_gateway
  if [[ "$status" -ne 0 || "$rc" -ne 0 ]]; then dump_log; fi
  if [[ "${INTEROP_KEEP:-}" == 1 ]]; then
    log "kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- npm packages
# Also when package-lock.json changed since the last install (npm keeps its
# own copy in node_modules/.package-lock.json), e.g. a dependency was added.
if [[ ! -d "$here/node_modules" || "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]]; then
  log "npm ci in $here"
  (cd "$here" && npm ci --no-audit --no-fund)
fi

# ---------------------------------------------------------------- gateway binary
if [[ -n "${MCPGW_BIN:-}" ]]; then
  bin="$MCPGW_BIN"
else
  bin="$tmp/mcpgw"
  log "go build -o $bin ./cmd/mcpgw"
  (cd "$root" && go build -o "$bin" ./cmd/mcpgw)
fi

# ---------------------------------------------------------------- config
free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
port="$(free_port)"
admin_port="$(free_port)"
while [[ "$admin_port" == "$port" ]]; do admin_port="$(free_port)"; done

fs_dir="$tmp/fs-root"
mkdir -p "$fs_dir"
memory_file="$tmp/memory.jsonl"
modern_wire_log="$tmp/modern-wire.jsonl" # what servers/modern-server.mjs saw and sent
: >"$modern_wire_log"
config="$tmp/gateway.yaml"

# Replaces @NAME@ placeholders; refuses values that would need YAML escaping.
PORT="$port" ADMIN_PORT="$admin_port" HERE="$here" MODULES="$here/node_modules" FS_DIR="$fs_dir" \
MEMORY_FILE="$memory_file" MODERN_WIRE_LOG="$modern_wire_log" node -e '
  const fs = require("fs");
  const [tmpl, out] = process.argv.slice(1);
  const text = fs.readFileSync(tmpl, "utf8").replace(/@([A-Z_]+)@/g, (m, k) => {
    const v = process.env[k];
    if (v === undefined) throw new Error(`no value for placeholder ${m}`);
    if (/["\\\n]/.test(v)) throw new Error(`${k}=${v} needs YAML escaping; use a simpler path`);
    return v;
  });
  fs.writeFileSync(out, text);
' "$here/gateway.yaml.tmpl" "$config"
log "config $config:"
sed 's/^/    /' "$config" >&2

# ---------------------------------------------------------------- start mcpgw
url="http://127.0.0.1:$port/mcp"
log "starting: $bin run --config $config"
"$bin" run --config "$config" >"$gw_log" 2>&1 &
gw_pid=$!

init_body='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpgw-interop-probe","version":"0"}}}'
deadline=$((SECONDS + ready_timeout))
ready=0
while ((SECONDS < deadline)); do
  if ! kill -0 "$gw_pid" 2>/dev/null; then
    wait "$gw_pid" && rc=0 || rc=$?
    gw_pid=""
    log "mcpgw exited early with status $rc"
    exit 1
  fi
  code="$(curl -sS -o "$tmp/probe.body" -D "$tmp/probe.headers" -w '%{http_code}' --max-time 5 \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    --data "$init_body" "$url" 2>/dev/null || true)"
  if [[ "$code" == 200 ]]; then
    ready=1
    break
  fi
  sleep 0.3
done
if ((ready == 0)); then
  log "mcpgw did not answer initialize with 200 on $url within ${ready_timeout}s (last status: ${code:-none})"
  [[ -f "$tmp/probe.body" ]] && { log "last response body:"; cat "$tmp/probe.body" >&2; echo >&2; }
  exit 1
fi
log "mcpgw answers on $url (pid $gw_pid)"

# End the probe's session so it does not linger (stateless gateways issue none).
sid="$(tr -d '\r' <"$tmp/probe.headers" | awk 'tolower($1)=="mcp-session-id:" {print $2}' | tail -n1)"
if [[ -n "$sid" ]]; then
  curl -sS -o /dev/null --max-time 5 -X DELETE -H "Mcp-Session-Id: $sid" \
    -H 'MCP-Protocol-Version: 2025-06-18' "$url" || true
fi

# Upstreams start concurrently with the listener; if the admin listener has a
# readiness endpoint, wait for it (it stays 503 until the upstreams marked
# required in gateway.yaml.tmpl, modern, basic and budget, are connected).
while ((SECONDS < deadline)); do
  rcode="$(curl -sS -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$admin_port/readyz" 2>/dev/null || true)"
  case "$rcode" in
    200) log "admin /readyz is 200"; break ;;
    503) sleep 0.3 ;;
    *) log "admin /readyz answered '${rcode:-nothing}'; not waiting on it"; break ;;
  esac
done

# ---------------------------------------------------------------- run the tests
# One file at a time: the files share the gateway's single stdio child per
# upstream, and a sampling/elicitation request from a shared stdio upstream
# is relayed only while exactly one call is in flight on it, so another
# file's concurrent everything__* calls would make fidelity.test.mjs and
# stateless.test.mjs flaky.
# (--test-concurrency needs Node >= 20.10; older nodes run files in parallel.)
tests=(${INTEROP_TESTS:-test/interop/client.test.mjs test/interop/fidelity.test.mjs test/interop/stateless.test.mjs test/interop/modern-upstream.test.mjs test/interop/hosts.test.mjs test/interop/auth.test.mjs test/interop/tasks.test.mjs test/interop/toolsearch.test.mjs test/interop/curation.test.mjs test/interop/peruser.test.mjs test/interop/login.test.mjs test/interop/stdio-host.test.mjs test/interop/intercept.test.mjs})
node_flags=(--test)
if node --test-concurrency=1 -e '' >/dev/null 2>&1; then node_flags+=(--test-concurrency=1); fi
modern_url="http://127.0.0.1:$port/mcp/modern"
hosts_url="http://127.0.0.1:$port/mcp/hosts"
log "MCPGW_URL=$url MCPGW_MODERN_URL=$modern_url MCPGW_HOSTS_URL=$hosts_url MCPGW_FS_DIR=$fs_dir node ${node_flags[*]} ${tests[*]}"
set +e
(cd "$root" && MCPGW_URL="$url" MCPGW_MODERN_URL="$modern_url" MCPGW_MODERN_WIRE_LOG="$modern_wire_log" \
  MCPGW_HOSTS_URL="$hosts_url" MCPGW_FS_DIR="$fs_dir" MCPGW_BIN="$bin" node "${node_flags[@]}" "${tests[@]}")
status=$?
set -e

stop_gateway
if [[ -n "$orphans" ]]; then
  log "FAIL: stdio children of mcpgw were still running after it exited"
  status=1
fi
if [[ "$status" -eq 0 ]]; then log "PASS"; else log "FAIL (status $status)"; fi
exit "$status"
