// Package deploy holds mcpgw's deployment files: Kubernetes manifests, a
// Helm chart, Prometheus scrape config and alert rules, a Grafana dashboard
// and a systemd unit. It has no code; its test checks that the files parse,
// that every mcpgw config in them (and in docs/) loads with mcpgw's real
// config loader, and that the dashboard and alerts name real metrics.
package deploy
