#!/usr/bin/env bash
# Builds test/idp, the OAuth/OIDC provider the upstream-identity tests run
# on loopback (zitadel/oidc's example OP, pinned by go.mod and go.sum here;
# a module of its own, so zitadel stays out of the gateway's dependencies),
# into $(go env GOPATH)/bin/mcpgw-test-idp, or the path given. Go's build
# cache makes a rebuild of an unchanged tree take a second or two.
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-$(go env GOPATH)/bin/mcpgw-test-idp}"
mkdir -p "$(dirname "$out")"
go build -o "$out" .
echo "test OP built at $out"
