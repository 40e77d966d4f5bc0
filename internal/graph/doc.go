// Package graph is retrycap's math: the service call graph, amplification (the worst product of
// client attempts and per-hop attempts along any path from an entrypoint), worst-case load
// (the sum over all paths, fan-out included), retry-cycle detection, the rewrite planners
// (whole graph, with floors the edges below cannot go under (PlanRewriteFloors), and
// admission-local where only one service's edges may change), the admission
// judge, and the human explanations ("gateway -x3-> order -x3-> payment = 9 > cap 4"); the time
// along the chain (time.go: the worst time to answer and the timeout inversions; gatetime.go: the
// admission judge against a maximum). On a graph with cycles every figure is taken over the chains
// that visit a service once (cycles.go, judgesimple.go, timecycles.go).
//
// It is pure Go with no Kubernetes imports so the controller, the webhooks and the CLI share
// one implementation and it can be tested and benchmarked without a cluster. Names are interned
// to dense int32 ids and every computation is one or two passes in topological order over the
// strongly connected components, O(V+E), with int64 arithmetic that saturates at
// math.MaxInt64 and never wraps.
package graph
