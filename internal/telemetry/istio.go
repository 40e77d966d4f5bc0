package telemetry

import (
	"strings"

	"github.com/prometheus/common/model"
)

// Outside is an Entrypoint's Via for a caller outside the mesh (Istio's source_workload
// "unknown": the request came from no sidecar).
const Outside = "outside the mesh"

// istioCalleeMissing is the reason of a series without a callee label.
const istioCalleeMissing = `istio: destination_service_name or destination_service_namespace missing (Istio writes both on every series, "unknown" when there is no Service: a relabelling or a Telemetry tagOverrides dropped it): not an edge`

// istio reads istio_requests_total and istio_tcp_connections_opened_total summed by reporter
// and the four edge labels Kiali groups its graph by (source_workload,
// source_workload_namespace, destination_service_name, destination_service_namespace).
func (r *reader) istio(httpS, tcpS []*model.Sample) {
	type key struct {
		from Caller
		to   Callee
	}
	// unreported are a series' counts without a reporter label (a relabelling dropped it):
	// the sides' counts summed, taken when no side is known.
	type counts struct{ source, waypoint, destination, unreported float64 }
	place := func(s *model.Sample) (key, bool, bool) {
		src, srcNS := label(s.Metric, "source_workload"), label(s.Metric, "source_workload_namespace")
		dst, dstNS := label(s.Metric, "destination_service_name"), label(s.Metric, "destination_service_namespace")
		to := Callee{dstNS, dst}
		switch {
		case dst == "unknown":
			r.w.add("istio: destination_service_name unknown (traffic to no Service: a pod IP, no route): not an edge", s.Metric)
			return key{}, false, false
		case istioNoService[dst]:
			r.w.add("istio: destination_service_name is one of Envoy's passthrough or black-hole clusters (traffic to no Service: a pod IP, an unregistered host, a port no Service declares; its namespace is the called pod's): not an edge", s.Metric)
			return key{}, false, false
		case dst == "" || dstNS == "":
			// Istio writes both on every series ("unknown" when there is no Service): one
			// missing was dropped on the way (a relabelling, a Telemetry tagOverrides REMOVE),
			// and its calls went to a callee nobody can name.
			r.unnamed(istioCalleeMissing, s, Callee{})
			return key{}, false, false
		case dstNS == "unknown":
			r.w.add("istio: destination_service_namespace unknown (a host outside the cluster's Services): not an edge", s.Metric)
			return key{}, false, false
		case !isServiceName(dst):
			// A ServiceEntry's host (Istio names it by its host, in the ServiceEntry's
			// namespace: pilot's buildServiceMetadata) or the Host header the stats fall back
			// to: a cluster DNS name is that Service, a single label the Service of that name
			// in the namespace given, any other host one outside the cluster (no namespace:
			// the ServiceEntry's is not the host's).
			c, why := peerHost(dst, false)
			if why != "" {
				r.w.add("istio: destination_service_name is "+why+": not an edge", s.Metric)
				return key{}, false, false
			}
			if c.Namespace == "" && !strings.Contains(c.Name, ".") {
				c.Namespace = dstNS
			}
			to = c
		}
		out := src == "unknown"
		if !out && (src == "" || srcNS == "" || srcNS == "unknown") {
			r.unnamed("istio: source_workload or source_workload_namespace missing: not an edge", s, to)
			return key{}, false, false
		}
		var buf [4]named
		ns := buf[:0]
		if !out {
			ns = append(ns, named{"source_workload_namespace", srcNS, kindNamespace}, named{"source_workload", src, kindWorkload})
		}
		ns = calleeNames(ns, to, "destination_service_name", "destination_service_namespace")
		if !r.names("istio", "", s, ns...) {
			return key{}, false, false
		}
		if out {
			return key{to: to}, true, true
		}
		return key{Caller{Namespace: srcNS, Name: src}, to}, false, true
	}
	byKey := map[key]*counts{}
	var order []key
	// waypointed are the Services whose calls a waypoint reported over the window (by their
	// callers): every caller in the mesh reaches them through it.
	waypointed := map[Callee]bool{}
	for _, s := range httpS {
		// A caller outside the mesh is keyed with no caller (k.from zero): the layers that saw
		// its calls (a waypoint, the destination's sidecar) each counted them, as on an edge of
		// the mesh, and are taken alike below, never summed.
		k, _, ok := place(s)
		if !ok {
			continue
		}
		v := float64(s.Value)
		c := byKey[k]
		if c == nil {
			c = &counts{}
			byKey[k] = c
			order = append(order, k)
		}
		switch label(s.Metric, "reporter") {
		case "source":
			c.source += v
		case "waypoint":
			c.waypoint += v
			if v > 0 {
				waypointed[k.to] = true
			}
		case "destination":
			c.destination += v
		case "":
			c.unreported += v
			r.w.add("istio: reporter missing (a relabelling dropped it): the edge is read, its count the sum of the sides that reported (up to twice its calls)", s.Metric)
		default:
			r.w.add("istio: reporter neither source, waypoint nor destination", s.Metric)
		}
	}
	for _, k := range order {
		c := byKey[k]
		calls, tries := c.source, 0.0
		switch {
		case c.source > 0:
			if c.destination > 0 {
				tries = c.destination / c.source
			}
		case c.waypoint > 0:
			calls = c.waypoint
		case c.destination > 0:
			calls = c.destination
		default:
			calls = c.unreported
		}
		if k.from == (Caller{}) {
			r.addEntry(SourceIstio, k.to, Outside, calls)
			continue
		}
		r.addEdge(SourceIstio, k.from, k.to, calls, tries, "")
	}
	// A connection to a waypointed Service that only its ztunnel reported (reporter
	// "destination"), from a workload whose own side reported none: the waypoint's hop to the
	// Service's pods (ztunnel names the source by the connection's address, the waypoint's;
	// the waypoint's pods are out of ztunnel's capture, so nothing reports them as a source).
	// A caller of the mesh has a reporting side of its own (its ztunnel or sidecar).
	type placedTCP struct {
		k key
		s *model.Sample
	}
	tcp := make([]placedTCP, 0, len(tcpS))
	callerReported := map[key]bool{}
	for _, s := range tcpS {
		k, out, ok := place(s)
		if !ok || out {
			continue
		}
		tcp = append(tcp, placedTCP{k, s})
		if label(s.Metric, "reporter") != "destination" {
			callerReported[k] = true
		}
	}
	for _, p := range tcp {
		k, s := p.k, p.s
		if label(s.Metric, "reporter") == "destination" && waypointed[k.to] && !callerReported[k] {
			if s.Value > 0 {
				r.w.add("istio: connections to a Service a waypoint serves that only the destination reported, from a workload that reported none itself (the waypoint's hop to the Service's pods; or a caller outside the mesh, whose calls no waypoint saw): not an edge", s.Metric)
			}
			continue
		}
		r.addEdge(SourceIstio, k.from, k.to, float64(s.Value), 0, "TCP only (istio_tcp_connections_opened_total, no istio_requests_total): no HTTP retry applies")
	}
}
