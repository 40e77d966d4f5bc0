package telemetry

import (
	"github.com/prometheus/common/model"
)

// A nameKind is the kind of Kubernetes name a label of an edge must hold.
type nameKind int

const (
	kindNamespace nameKind = iota // a namespace: a DNS-1123 label
	kindWorkload                  // a workload (a controller or a Pod): a DNS-1123 subdomain
	kindService                   // a Service: a DNS-1035 label
	kindCaller                    // a service name of a caller: a label value (the service node of workloads, ServiceName)
	kindHost                      // a host outside the cluster's Services: a DNS-1123 subdomain
)

var nameKinds = [...]string{
	kindNamespace: "namespace name (a DNS-1123 label)",
	kindWorkload:  "workload name (a DNS-1123 subdomain)",
	kindService:   "Service name (a DNS-1035 label)",
	kindCaller:    `service name (a label value: at most 63 letters, digits, "-", "_" and ".")`,
	kindHost:      "host name (a DNS-1123 subdomain)",
}

// ok says whether v is a name of kind k, as k8s.io/apimachinery's validation says
// (TestNameKindsAsKubernetes): by hand, as a poll checks every series' names (the validation
// package's regular expressions made a read of 40,000 series 2.7 times slower).
func (k nameKind) ok(v string) bool {
	switch k {
	case kindNamespace:
		return len(v) <= 63 && dnsLabels(v, false)
	case kindService:
		return len(v) <= 63 && dnsLabels(v, false) && v[0] >= 'a' && v[0] <= 'z'
	case kindCaller:
		return v != "" && isLabelValue(v)
	}
	return len(v) <= 253 && dnsLabels(v, true)
}

// dnsLabels says whether v is one DNS-1123 label (dots false) or, dots true, labels joined by
// dots: lower-case letters, digits and "-", each starting and ending with a letter or digit.
func dnsLabels(v string, dots bool) bool {
	if v == "" {
		return false
	}
	start := true // at a label's first byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			start = false
		case c == '-' && !start && i+1 < len(v) && v[i+1] != '.':
		case c == '.' && dots && !start && i+1 < len(v):
			start = true
		default:
			return false
		}
	}
	return true
}

// isLabelValue says whether v is a Kubernetes label value: at most 63 letters, digits, "-", "_"
// and ".", starting and ending with a letter or digit (or empty).
func isLabelValue(v string) bool {
	if len(v) > 63 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((c != '-' && c != '_' && c != '.') || i == 0 || i == len(v)-1) {
			return false
		}
	}
	return true
}

// named is a label of an edge's series (as the message names it), its value and the kind of
// name it must hold.
type named struct {
	label, value string
	kind         nameKind
}

// misnamed is the first of ns whose value is no name of its kind; ok false when all are names.
func misnamed(ns ...named) (named, bool) {
	for _, n := range ns {
		if !n.kind.ok(n.value) {
			return n, true
		}
	}
	return named{}, false
}

// names says whether an edge's labels hold names, and warns of the first that does not: a label
// value is whatever the scrape, a relabelling or a pod's service.name wrote, and one with a "/",
// a "=", a space or a newline names no workload, namespace or Service. Taken as one, it would be
// a node of the status's graph, or a patch discover writes for a workload nobody can have, or an
// entry of the annotation it writes ("payment=9" is 9 attempts; "a/b" one the annotation's parser
// refuses).
// The warning's reason starts with src, and metric after it when not "" (joined only then: no
// string per series).
func (r *reader) names(src, metric string, s *model.Sample, ns ...named) bool {
	n, bad := misnamed(ns...)
	if bad {
		if metric != "" {
			src += " " + metric
		}
		r.w.add(src+": "+n.label+" is no "+nameKinds[n.kind]+": not an edge", s.Metric)
	}
	return !bad
}

// calleeNames appends to ns the named labels of a callee whose name and namespace the labels
// nameLabel and nsLabel gave: a Service in a namespace, or a host outside the cluster (no
// namespace). Callers pass a buffer of their stack: no allocation per series.
func calleeNames(ns []named, to Callee, nameLabel, nsLabel string) []named {
	if to.Namespace == "" {
		return append(ns, named{nameLabel, to.Name, kindHost})
	}
	return append(ns, named{nsLabel, to.Namespace, kindNamespace}, named{nameLabel, to.Name, kindService})
}
