// Package prometheus pins the Prometheus server (github.com/prometheus/prometheus) that the
// observed-amplification test scrapes the lab's proxies with. It is a module of its own:
// Prometheus' module graph (cloud service discovery, OpenTelemetry) would move the product's
// Kubernetes and gRPC versions. hack/prometheus-bin.sh builds the binary into the cache.
//
// Its one test runs the relabelings docs/observe.md gives for the proxies' PodMonitor through
// Prometheus' own relabelling code (go test ./... in this directory).
package prometheus
