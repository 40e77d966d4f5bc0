package telemetry

import (
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation"
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

func (k nameKind) ok(v string) bool {
	switch k {
	case kindNamespace:
		return len(validation.IsDNS1123Label(v)) == 0
	case kindService:
		return len(validation.IsDNS1035Label(v)) == 0
	case kindCaller:
		return v != "" && len(validation.IsValidLabelValue(v)) == 0
	}
	return len(validation.IsDNS1123Subdomain(v)) == 0
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
func (r *reader) names(src string, s *model.Sample, ns ...named) bool {
	n, bad := misnamed(ns...)
	if bad {
		r.w.add(src+": "+n.label+" is no "+nameKinds[n.kind]+": not an edge", s.Metric)
	}
	return !bad
}

// calleeNames are the named labels of a callee whose name and namespace the labels nameLabel and
// nsLabel gave: a Service in a namespace, or a host outside the cluster (no namespace).
func calleeNames(to Callee, nameLabel, nsLabel string) []named {
	if to.Namespace == "" {
		return []named{{nameLabel, to.Name, kindHost}}
	}
	return []named{{nsLabel, to.Namespace, kindNamespace}, {nameLabel, to.Name, kindService}}
}
