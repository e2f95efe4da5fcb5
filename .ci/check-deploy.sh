#!/usr/bin/env bash
# Checks what deploy/ holds beyond what `go test ./deploy/` checks: the
# Prometheus alert rules with promtool (syntax and their unit tests).
# Installs promtool (Debian's prometheus package) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v promtool >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
promtool check rules deploy/prometheus/alerts.yaml
(cd deploy/prometheus && promtool test rules alerts_test.yaml)
