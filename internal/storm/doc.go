// Package storm is the retry-storm lab behind `retrycap storm`: real
// retrycap-proxy processes on loopback in front of small chain apps (an edge
// client, gateway, order, and a capacity-limited payment service), steady
// open-loop load, payment hung for a while (it reads requests and answers
// none: Options.Outage; or killed) and restored, run twice on the same load:
// a naive arm (per-hop retries, also on a per-try timeout, no jitter, no
// budget, no breaker) and a retrycap arm (same declared attempts, chain cap,
// retry budget, breaker, jittered backoff, a deadline). Both arms' apps
// finish their calls when their caller hangs up, as most servers do. It measures what the incident write-ups
// measured (requests at payment per failed user request, retries during the
// outage, time to recover, duplicated POST side effects), the user's wait for
// an answer during the outage and the orphaned attempts (requests a tier
// received after its user had stopped waiting: the retrycap arm's entry proxy
// carries a deadline, --max-time-to-answer), and draws requests/s
// at payment over time for both arms as an SVG chart. Options.Protocol runs
// the same chains over gRPC (grpc.go: the edge client; the apps are
// labapp's gRPC apps in child processes, payment a gRPC service).
//
// account.go is the pure accounting (bucketing, ratios, recovery, waits,
// orphaned attempts) with table tests; retries.go the retries target's
// arithmetic (the naive arm's retries under a hang by construction, the
// most the retrycap arm's can make; the proxy's own policy.Backoff and
// retry-room rule); payment.go is the payment service
// (killed or hung for the outage); lab.go starts one arm's chain and records
// what each tier received; run.go drives the load and assembles the Result;
// summary.go, json.go and chart.go render it; options.go holds the Options and their bounds,
// observe.go reads each arm's proxies' access logs with internal/observe (ObserveArm).
package storm
