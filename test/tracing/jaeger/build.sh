#!/usr/bin/env bash
# Builds Jaeger v2, the real OTLP receiver of internal/gateway's
# TestTracesReachJaeger, from its Go module (pinned by go.mod and go.sum
# here; a module of its own, so the gateway's dependencies stay its own)
# into $(go env GOPATH)/bin/jaeger, or the path given. A binary of the same
# version already there is kept: the build takes minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-$(go env GOPATH)/bin/jaeger}"
version="$(awk '$1 == "github.com/jaegertracing/jaeger" { print $2 }' go.mod)"
stamp="$out.version"
if [[ -x "$out" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
  echo "jaeger $version: already built at $out"
  exit 0
fi
mkdir -p "$(dirname "$out")"
echo "building jaeger $version into $out (a few minutes)"
go build -o "$out" github.com/jaegertracing/jaeger/cmd/jaeger
echo "$version" > "$stamp"
