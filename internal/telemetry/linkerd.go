package telemetry

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/workload"
)

// linkerdCallers are the labels that name the caller on Linkerd's series, and linkerdKinds
// their workload kinds: one per templated kind of workload.Kinds. Linkerd's proxy injector
// labels a pod linkerd.io/proxy-<kind>=<name> with the kind in lower case (linkerd2
// pkg/inject/inject.go ResourceConfig.populateMeta; the owner from controller/k8s
// GetOwnerKindAndName), and linkerd-viz's scrape configuration copies each to a label <kind>,
// but proxy-job to k8s_job: Prometheus's own job label is the scrape job's (viz/charts/
// linkerd-viz/templates/prometheus.yaml, pkg/k8s KindToL5DLabel). A Pod has no such label.
var linkerdCallers, linkerdKinds = func() ([]string, map[string]string) {
	var labels []string
	kinds := map[string]string{}
	for _, k := range workload.Kinds {
		if k.TemplatePath == nil {
			continue
		}
		l := strings.ToLower(k.Kind)
		if k.Kind == workload.KindJob {
			l = "k8s_job"
		}
		labels = append(labels, l)
		kinds[l] = k.Kind
	}
	return labels, kinds
}()

// LinkerdExportedNamespace is where Prometheus puts a series' own namespace label when the scrape
// that reads it sets namespace too and does not honor the series' labels (honor_labels: false,
// its default): linkerd-viz's series carry the caller's namespace (its scrape adds it), and
// Linkerd's way into a cluster's Prometheus is federation (Linkerd's "Exporting Metrics" task:
// a /federate job, or a ServiceMonitor, with honor_labels: true). Without it, namespace is the
// federated Prometheus' own, and every caller would be read in that namespace: such a series
// names no caller (linkerdEdge); the manager's observed amplification refuses it alike
// (promquery.Join, observed.Series.ExportedNamespace).
const LinkerdExportedNamespace = "exported_namespace"

// linkerd reads response_total{direction="outbound"} by (namespace, one of linkerdCallers) ->
// (dst_namespace, dst_service), and the 2.16+ route family
// outbound_{http,grpc}_route_request_statuses_total by the same callers -> (parent_namespace,
// parent_name) of routes whose parent is a Service. Both count the same calls of a proxy: an
// edge takes the larger. The route family's calls are kept for the tries (linkerdTries).
func (r *reader) linkerd(metric string, v model.Vector) {
	for _, s := range v {
		from, to, ok := r.linkerdEdge(metric, s)
		if !ok {
			continue
		}
		n := float64(s.Value)
		r.addEdge(SourceLinkerd, from, to, n, 0, "")
		if metric != "response_total" && n > 0 {
			r.routeCalls[edgeKey{src: SourceLinkerd, from: from, to: to}] += n
		}
	}
}

// linkerdResponses reads response_total after the route family. Its dst_service is the Service
// of the endpoints that answered (linkerd2-proxy linkerd/app/outbound/src/http/concrete.rs: the
// endpoint's metadata labels with a dst_ prefix; linkerd2 controller/api/destination/watcher/
// port_publisher.go metricLabels: the EndpointSlice's service label), not the Service the caller
// addressed: behind a route that sends calls to other Services (an HTTPRoute's backendRefs,
// Flagger's payment -> payment-primary/payment-canary) it names backends the caller never calls
// by name. The route family's backend series (outbound_{http,grpc}_route_backend_response_
// statuses_total, by parent and backend) say which: a response_total edge to a Service that is a
// backend of another parent for that caller, and no parent itself, is not read (a warning). A
// ServiceProfile's routes (the proxy's profile router) and older proxies write no route series:
// their response_total edges are read as before.
func (r *reader) linkerdResponses(v, backends model.Vector) {
	backendOf := map[edgeKey]bool{}
	for _, s := range backends {
		from, parent, ok := r.linkerdEdge("outbound_http_route_backend_response_statuses_total", s)
		if !ok || s.Value <= 0 {
			continue
		}
		b := Callee{label(s.Metric, "backend_namespace"), label(s.Metric, "backend_name")}
		if b.Name != "" && b != parent {
			backendOf[edgeKey{src: SourceLinkerd, from: from, to: b}] = true
		}
	}
	var keep model.Vector
	for _, s := range v {
		from, to, ok := r.linkerdEdge("response_total", s)
		if !ok {
			continue
		}
		k := edgeKey{src: SourceLinkerd, from: from, to: to}
		if backendOf[k] && r.edges[k] == nil {
			if s.Value > 0 {
				r.w.add("linkerd response_total: a backend a route sent the caller's calls to (dst_service is the Service whose endpoints answered; the caller addressed the route's parent): not an edge", s.Metric)
			}
			continue
		}
		keep = append(keep, s)
	}
	r.linkerd("response_total", keep)
}

// linkerdEdge places one series of metric, with a warning when it cannot be.
func (r *reader) linkerdEdge(metric string, s *model.Sample) (Caller, Callee, bool) {
	dstNS, dst := "dst_namespace", "dst_service"
	if metric != "response_total" {
		dstNS, dst = "parent_namespace", "parent_name"
	}
	ns := label(s.Metric, "namespace")
	var from Caller
	callerLabel := ""
	for _, l := range linkerdCallers {
		if n := label(s.Metric, l); n != "" {
			from = Caller{Namespace: ns, Name: n, Kind: linkerdKinds[l]}
			callerLabel = l
			break
		}
	}
	to := Callee{label(s.Metric, dstNS), label(s.Metric, dst)}
	switch {
	case label(s.Metric, LinkerdExportedNamespace) != "":
		if to.Namespace == "" || to.Name == "" {
			to = Callee{}
		}
		r.unnamed(fmt.Sprintf("linkerd %s: the scrape renamed the series' own namespace label %s (a federation or scrape without honor_labels: true): its namespace is the scrape target's, not the caller's: not an edge", metric, LinkerdExportedNamespace), s, to)
		return from, to, false
	case ns == "" || from.Name == "":
		if to.Namespace == "" || to.Name == "" {
			to = Callee{}
		}
		r.unnamed(fmt.Sprintf("linkerd %s: no namespace, or none of %s (the scrape's labels; Linkerd's proxy injector labels a CronJob's pod with none): not an edge", metric, strings.Join(linkerdCallers, ", ")), s, to)
		return from, to, false
	case to.Namespace == "" || to.Name == "":
		r.w.add(fmt.Sprintf("linkerd %s: no %s or %s (a destination that is not a Service): not an edge", metric, dstNS, dst), s.Metric)
		return from, to, false
	case !r.names("linkerd", metric, s, named{"namespace", ns, kindNamespace}, named{callerLabel, from.Name, kindWorkload},
		named{dstNS, to.Namespace, kindNamespace}, named{dst, to.Name, kindService}):
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
		retries[edgeKey{src: SourceLinkerd, from: from, to: to}] += float64(s.Value)
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
