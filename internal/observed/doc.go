// Package observed turns what the proxies (and a mesh's sidecars) counted over a window into the
// observed side of a policy's status: per edge the tries actually made (attempts / calls) and
// the calls the caller's application made per request it received (its calls over the attempts
// its callers' layers sent it: application retries behind the proxy and fan-out show there),
// their product along the worst path, and the ObservedWithinComputed condition, which is False
// when either factor of an edge exceeds what the graph computes for it (a retry layer the
// graph does not know: application code, a mesh it does not read, a proxy configured by hand,
// or a fan-out the annotation does not declare).
//
// It is pure: series in, numbers and a condition out. internal/promquery fetches the series from
// Prometheus; internal/controller puts the result into the status.
package observed
