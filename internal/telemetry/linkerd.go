package telemetry

import (
	"fmt"

	"github.com/prometheus/common/model"
)

// linkerdKinds are the workload kinds of the labels linkerd-viz's scrape configuration copies
// from the pod's linkerd.io/proxy-<kind> label.
var linkerdKinds = map[string]string{"deployment": "Deployment", "statefulset": "StatefulSet", "daemonset": "DaemonSet"}

// linkerd reads response_total{direction="outbound"} by (namespace, deployment|statefulset|
// daemonset) -> (dst_namespace, dst_service), and the 2.16+ route family
// outbound_{http,grpc}_route_request_statuses_total by the same callers -> (parent_namespace,
// parent_name) of routes whose parent is a Service. Both count the same calls of a proxy: an
// edge takes the larger. The route family's calls are kept for the tries (linkerdTries).
func (r *reader) linkerd(metric string, v model.Vector) {
	for _, s := range v {
		from, to, ok := r.linkerdEdge(metric, s)
		if !ok {
			continue
		}
		if n, ok := value(&r.w, SourceLinkerd, s); ok {
			r.addEdge(SourceLinkerd, from, to, n, 0, "")
			if metric != "response_total" && n > 0 {
				r.routeCalls[edgeKey{src: SourceLinkerd, from: from, to: to}] += n
			}
		}
	}
}

// linkerdEdge places one series of metric, with a warning when it cannot be.
func (r *reader) linkerdEdge(metric string, s *model.Sample) (Caller, Callee, bool) {
	dstNS, dst := "dst_namespace", "dst_service"
	if metric != "response_total" {
		dstNS, dst = "parent_namespace", "parent_name"
	}
	ns := label(s.Metric, "namespace")
	var from Caller
	for _, l := range linkerdCallers {
		if n := label(s.Metric, l); n != "" {
			from = Caller{Namespace: ns, Name: n, Kind: linkerdKinds[l]}
			break
		}
	}
	to := Callee{label(s.Metric, dstNS), label(s.Metric, dst)}
	switch {
	case ns == "" || from.Name == "":
		r.w.add(fmt.Sprintf("linkerd %s: no namespace, or none of deployment, statefulset, daemonset (the scrape's labels): not an edge", metric), s.Metric)
		return from, to, false
	case to.Namespace == "" || to.Name == "":
		r.w.add(fmt.Sprintf("linkerd %s: no %s or %s (a destination that is not a Service): not an edge", metric, dstNS, dst), s.Metric)
		return from, to, false
	}
	return from, to, true
}

// linkerdTries sets the tries per call of the edges the route family counted: (request
// statuses + retry requests) / request statuses. linkerd2-proxy's route metrics layer wraps its
// retry layer, so a status is one call of the application, and retry_requests_total counts each
// retry but not the first try (docs/observe.md cites the source). Retries on an edge whose calls
// the window did not see are warned, not guessed.
func (r *reader) linkerdTries(v model.Vector) {
	const metric = "outbound_http_route_retry_requests_total"
	retries := map[edgeKey]float64{}
	for _, s := range v {
		from, to, ok := r.linkerdEdge(metric, s)
		if !ok {
			continue
		}
		if n, ok := value(&r.w, SourceLinkerd, s); ok {
			retries[edgeKey{src: SourceLinkerd, from: from, to: to}] += n
		}
	}
	for k, n := range retries {
		calls := r.routeCalls[k]
		e := r.edges[k]
		if calls <= 0 || e == nil {
			if n > 0 {
				r.w.add("linkerd "+metric+": retries on an edge with no request statuses over the window: no tries per call", model.Metric{
					"namespace": model.LabelValue(k.from.Namespace), "caller": model.LabelValue(k.from.Name), "parent": model.LabelValue(k.to.String())})
			}
			continue
		}
		e.Tries = (calls + n) / calls
	}
	for k, calls := range r.routeCalls {
		if e := r.edges[k]; e != nil && e.Tries == 0 && calls > 0 && len(v) > 0 {
			e.Tries = 1 // the retry family exists and counted none on this edge
		}
	}
}
