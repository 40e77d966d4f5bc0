// Package storm is the retry-storm lab behind `retrycap storm`: real
// retrycap-proxy processes on loopback in front of small chain apps (an edge
// client, gateway, order, and a capacity-limited payment service), steady
// open-loop load, payment killed for a while and restored, run twice on the
// same load: a naive arm (per-hop retries, no jitter, no budget, no breaker)
// and a retrycap arm (same declared attempts, chain cap, retry budget,
// breaker, jittered backoff). It measures what the incident write-ups
// measured (requests at payment per failed user request, retries during the
// outage, time to recover, duplicated POST side effects) and draws requests/s
// at payment over time for both arms as an SVG chart. Options.Protocol runs
// the same chains over gRPC (grpc.go: the edge client; the apps are
// labapp's gRPC apps in child processes, payment a gRPC service).
//
// account.go is the pure accounting (bucketing, ratios, recovery) with table
// tests; payment.go is the payment service; lab.go starts one arm's chain;
// run.go drives the load and assembles the Result.
package storm
