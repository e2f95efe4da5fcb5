// Package deploy holds mcpgw's deployment files: Kubernetes manifests, a
// Helm chart, Prometheus scrape config and alert rules, a Grafana dashboard
// and a systemd unit. It has no code. Its tests decode every Kubernetes
// manifest strictly into the Kubernetes API types and check that the
// objects fit together (selectors, ports, volumes, and every file and
// ${VAR} the mcpgw config needs); TestHelmRendered does the same for the
// chart as real Helm renders it (.ci/check-helm.sh). They also load every
// mcpgw config in deploy/ and docs/ with mcpgw's config loader and check
// that the dashboard and alerts name real metrics.
package deploy
