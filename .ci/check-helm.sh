#!/usr/bin/env bash
# Checks the Helm chart with the real Helm: helm lint --strict (values
# against values.schema.json, which includes mcpgw's config schema) and
# helm template for each values set, then TestHelmRendered (deploy/) decodes
# every rendered manifest strictly into the Kubernetes API types and loads
# the rendered config with mcpgw's loader. Also checks that values the
# schema or the chart refuse are refused.
#
# Needs helm on PATH; .ci/run installs it with
#   go install helm.sh/helm/v3/cmd/helm@v3.22.0
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"
if ! command -v helm >/dev/null; then
  echo "check-helm: helm is not on PATH; install it with: go install helm.sh/helm/v3/cmd/helm@v3.22.0" >&2
  exit 1
fi
helm version --short

chart=deploy/helm/mcpgw
full=$chart/ci/full-values.yaml
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# The chart links files/alerts.yaml to deploy/prometheus/alerts.yaml; Helm
# notes the link on stderr each time, which is expected.
quiet() { "$@" 2> >(grep -v 'found symbolic link in path' >&2); }

quiet helm lint --strict "$chart"
quiet helm lint --strict "$chart" -f "$full"
quiet helm lint --strict "$chart" -f "$chart/ci/fleet-values.yaml"

render() { local name=$1; shift; quiet helm template edge "$chart" --namespace mcp "$@" >"$out/$name.yaml"; }
render default
render full -f "$full"
render existing-secret --set existingSecret=mine
render fleet -f "$chart/ci/fleet-values.yaml"

# Refusals: each must fail, with the message that names the fix.
refuse() {
  local want=$1; shift
  local err
  if err="$(helm template edge "$chart" "$@" 2>&1 >/dev/null)"; then
    echo "check-helm: helm template $* succeeded; want a refusal mentioning: $want" >&2; exit 1
  fi
  if ! grep -qF -- "$want" <<<"$err"; then
    echo "check-helm: helm template $* failed without mentioning \"$want\":" >&2; echo "$err" >&2; exit 1
  fi
  echo "refused as expected: $* ($want)"
}
refuse "additional properties 'replicas' not allowed" --set replicas=3
refuse "additional properties 'listn' not allowed" --set config.listn=0.0.0.0:8080
refuse "mcpPort is 8081" --set mcpPort=8081
refuse "config.admin.listen is on loopback" --set config.admin.listen=127.0.0.1:9091 --set adminPort=9091
refuse "httpRoute.enabled needs httpRoute.parentRefs" --set httpRoute.enabled=true
refuse "redis.enabled needs sessionKeys.existingSecret or sessionKeys.keys" --set redis.enabled=true
refuse "redis.enabled writes config.sessions.redis" -f "$chart/ci/fleet-values.yaml" --set config.sessions.key_file=/x

MCPGW_HELM_RENDERED="$out" go test -race -count=1 -v -run '^TestHelmRendered$' ./deploy
