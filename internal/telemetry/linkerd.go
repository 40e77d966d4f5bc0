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
// edge takes the larger.
func (r *reader) linkerd(metric string, v model.Vector) {
	dstNS, dst := "dst_namespace", "dst_service"
	if metric != "response_total" {
		dstNS, dst = "parent_namespace", "parent_name"
	}
	for _, s := range v {
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
			continue
		case to.Namespace == "" || to.Name == "":
			r.w.add(fmt.Sprintf("linkerd %s: no %s or %s (a destination that is not a Service): not an edge", metric, dstNS, dst), s.Metric)
			continue
		}
		if n, ok := value(&r.w, SourceLinkerd, s); ok {
			r.addEdge(SourceLinkerd, from, to, n, 0, "")
		}
	}
}
