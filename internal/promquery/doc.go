// Package promquery is the thin adapter between Prometheus' HTTP API (client_golang's api and
// api/prometheus/v1) and internal/observed: it runs the bounded instant queries (a timeout, a
// series limit) for the proxies' and Envoy's per-upstream counters over a window and joins
// their answers into observed.Series. Everything that decides (per-edge tries, the product
// along paths, the condition) is in internal/observed.
package promquery
