// Package monitoring checks the alerts (config/prometheus/rules.yaml) and the Grafana dashboard
// (config/grafana/retrycap-dashboard.json) against the metrics the code exports, with
// Prometheus' own rule-file parser, PromQL parser and PromQL engine. The Helm chart reads the
// same two files (charts/retrycap/files links to them).
//
// It is a module of its own: Prometheus' module graph would move the product's Kubernetes
// versions. `make test` runs it (cd hack/monitoring && go test ./...).
package monitoring
