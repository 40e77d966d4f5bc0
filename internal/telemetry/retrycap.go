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
		case label(s.Metric, LinkerdExportedNamespace) != "":
			// Federated without honor_labels: namespace is the scrape target's (linkerdEdge).
			to := Callee{}
			if up != "" && up != "unknown" {
				to = proxyCallee(label(s.Metric, LinkerdExportedNamespace), up)
			}
			r.unnamed("retrycap: the scrape renamed the series' own namespace label "+LinkerdExportedNamespace+" (a federation or scrape without honor_labels: true): its namespace is the scrape target's, not the caller's: not an edge", s, to)
			continue
		case ns == "" || caller == "":
			r.unnamed("retrycap: no namespace or no "+cl+" label (the scrape adds them: docs/observe.md): not an edge", s, Callee{})
			continue
		case up == "" || up == "unknown":
			r.w.add("retrycap: upstream unknown (a host the proxy's --upstreams does not list): not an edge", s.Metric)
			continue
		}
		from, to := Caller{Namespace: ns, Name: caller, Service: true}, proxyCallee(ns, up)
		var buf [4]named
		if !r.names("retrycap", "", s, proxyNames(buf[:0], cl, from, to)...) {
			continue
		}
		n := float64(s.Value)
		r.addEdge(SourceRetrycap, from, to, n, 0, "")
		if n > 0 {
			r.proxyCalls[edgeKey{src: SourceRetrycap, from: from, to: to}] += n
		}
	}
}

// proxyCallee is the callee the proxy's upstream label names, from namespace ns.
func proxyCallee(ns, up string) Callee {
	if svc, sns, ok := annotations.SplitService(up); ok {
		return Callee{sns, svc}
	} else if containsDot(up) {
		return Callee{"", up} // an external host
	}
	return Callee{ns, up}
}

// retrycapTries sets the tries per call of the proxies' edges: retrycap_proxy_attempts_total
// (each try sent upstream, the first included) over retrycap_proxy_requests_total (each request
// the application made through the proxy), per caller and upstream (docs/observe.md). Attempts
// without requests over the window are warned, not guessed.
func (r *reader) retrycapTries(v model.Vector) {
	cl := r.o.CallerLabel
	if cl == "" {
		cl = "service"
	}
	attempts := map[edgeKey]float64{}
	for _, s := range v {
		ns, caller, up := label(s.Metric, "namespace"), label(s.Metric, cl), label(s.Metric, "upstream")
		if ns == "" || caller == "" || up == "" || up == "unknown" || label(s.Metric, LinkerdExportedNamespace) != "" {
			continue // warned for the requests' series, which have the same labels
		}
		from, to := Caller{Namespace: ns, Name: caller, Service: true}, proxyCallee(ns, up)
		var buf [4]named
		if _, bad := misnamed(proxyNames(buf[:0], cl, from, to)...); bad {
			continue // warned for the requests' series
		}
		attempts[edgeKey{src: SourceRetrycap, from: from, to: to}] += float64(s.Value)
	}
	for k, n := range attempts {
		calls, e := r.proxyCalls[k], r.edges[k]
		if calls <= 0 || e == nil {
			if n > 0 {
				r.w.add("retrycap: attempts on an upstream with no requests over the window: no tries per call", model.Metric{
					"namespace": model.LabelValue(k.from.Namespace), model.LabelName(cl): model.LabelValue(k.from.Name), "upstream": model.LabelValue(k.to.String())})
			}
			continue
		}
		e.Tries = n / calls
	}
}

// proxyNames appends to ns the named labels of a proxy's edge: its caller by the caller label
// cl, its callee by upstream.
func proxyNames(ns []named, cl string, from Caller, to Callee) []named {
	return calleeNames(append(ns, named{"namespace", from.Namespace, kindNamespace}, named{cl, from.Name, kindCaller}), to, "upstream", "upstream")
}

func containsDot(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return true
		}
	}
	return false
}
