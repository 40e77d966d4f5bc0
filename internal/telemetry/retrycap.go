package telemetry

import (
	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/annotations"
)

// retrycap reads retrycap_proxy_requests_total by namespace, the caller label the scrape adds
// (the proxy's series carry only upstream and code) and upstream. The proxy names only the
// upstreams its --upstreams lists (every other host is "unknown"): its edges confirm
// declarations and find stale ones, never an undeclared edge.
func (r *reader) retrycap(v model.Vector) {
	cl := r.o.CallerLabel
	if cl == "" {
		cl = "service"
	}
	for _, s := range v {
		ns, caller, up := label(s.Metric, "namespace"), label(s.Metric, cl), label(s.Metric, "upstream")
		switch {
		case ns == "" || caller == "":
			r.w.add("retrycap: no namespace or no "+cl+" label (the scrape adds them: docs/observe.md): not an edge", s.Metric)
			continue
		case up == "" || up == "unknown":
			r.w.add("retrycap: upstream unknown (a host the proxy's --upstreams does not list): not an edge", s.Metric)
			continue
		}
		n, ok := value(&r.w, SourceRetrycap, s)
		if !ok {
			continue
		}
		to := Callee{ns, up}
		if svc, sns, ok := annotations.SplitService(up); ok {
			to = Callee{sns, svc}
		} else if containsDot(up) {
			to = Callee{"", up} // an external host
		}
		r.addEdge(SourceRetrycap, Caller{Namespace: ns, Name: caller, Service: true}, to, n, 0, "")
	}
}

func containsDot(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return true
		}
	}
	return false
}
