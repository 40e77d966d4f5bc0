// Package promtest runs a real Prometheus server for tests: the binary hack/prometheus-bin.sh
// builds from its Go module (or $RETRYCAP_PROMETHEUS), a static scrape configuration of
// loopback targets (every 100 ms, or a given interval: StartTargetsEvery), a temporary TSDB. Tests of internal/promquery and internal/controller use it.
package promtest
