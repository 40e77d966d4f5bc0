package workload

import (
	"slices"
	"sort"
	"strings"
)

// Service is what the graph needs from a Kubernetes Service: the name callers use, and the
// workloads behind it (spec.selector over pod-template labels, same namespace). A Service
// without a selector, or of type ExternalName, fronts no workload: its node is a leaf.
type Service struct {
	Namespace, Name string
	// Selector is spec.selector; empty: no selector.
	Selector map[string]string
	// ExternalName: spec.type is ExternalName (the selector, if any, is ignored, as Kubernetes
	// ignores it).
	ExternalName bool
}

// String is "Service shop/order".
func (s Service) String() string { return "Service " + s.Namespace + "/" + s.Name }

// Leaf reports whether s fronts no workload whatever the labels: no selector, or ExternalName.
func (s Service) Leaf() bool { return s.ExternalName || len(s.Selector) == 0 }

// Selects reports whether s fronts w: same namespace, a selector, not ExternalName, and every
// selector pair among w's pod-template labels.
func (s Service) Selects(w Workload) bool {
	if s.Leaf() || s.Namespace != w.Namespace {
		return false
	}
	for k, v := range s.Selector {
		if lv, ok := w.Labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

// ServiceSet is the Services of a graph's input, indexed so that finding the Services that
// front a workload costs the workload's labels, not the number of Services. A nil *ServiceSet
// has no Services: every workload is its own service name's node, as before Services. Immutable
// once made: share it freely.
type ServiceSet struct {
	byName map[string]*Service // namespace/name
	// byPair are the selecting Services by one of their selector pairs (the smallest key):
	// "namespace/key=value" -> Services; a workload can only be selected by a Service whose
	// pair it has.
	byPair map[string][]*Service
	list   []Service
}

// NewServiceSet indexes svcs (a later Service of the same namespace and name replaces an
// earlier one); nil when svcs is empty.
func NewServiceSet(svcs []Service) *ServiceSet {
	if len(svcs) == 0 {
		return nil
	}
	s := &ServiceSet{byName: make(map[string]*Service, len(svcs)), byPair: map[string][]*Service{}}
	for _, v := range svcs {
		s.byName[v.Namespace+"/"+v.Name] = &v
	}
	s.list = make([]Service, 0, len(s.byName))
	for _, v := range s.byName {
		s.list = append(s.list, *v)
	}
	sort.Slice(s.list, func(i, j int) bool {
		a, b := s.list[i], s.list[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	for i := range s.list {
		v := &s.list[i]
		s.byName[v.Namespace+"/"+v.Name] = v
		if v.Leaf() {
			continue
		}
		k := minKey(v.Selector)
		p := v.Namespace + "/" + k + "=" + v.Selector[k]
		s.byPair[p] = append(s.byPair[p], v)
	}
	return s
}

func minKey(m map[string]string) string {
	first := true
	var min string
	for k := range m {
		if first || k < min {
			min, first = k, false
		}
	}
	return min
}

// Len is the number of Services.
func (s *ServiceSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.list)
}

// List returns the Services sorted by namespace and name (shared: read only).
func (s *ServiceSet) List() []Service {
	if s == nil {
		return nil
	}
	return s.list
}

// Get returns the Service ns/name.
func (s *ServiceSet) Get(ns, name string) (Service, bool) {
	if s == nil {
		return Service{}, false
	}
	v, ok := s.byName[ns+"/"+name]
	if !ok {
		return Service{}, false
	}
	return *v, true
}

// Has reports whether a Service ns/name exists.
func (s *ServiceSet) Has(ns, name string) bool {
	if s == nil {
		return false
	}
	_, ok := s.byName[ns+"/"+name]
	return ok
}

// Fronting returns the names of the Services that select w, sorted; nil when none does.
func (s *ServiceSet) Fronting(w Workload) []string {
	if s == nil || len(w.Labels) == 0 {
		return nil
	}
	var out []string
	var b strings.Builder
	for k, v := range w.Labels {
		b.Reset()
		b.WriteString(w.Namespace)
		b.WriteByte('/')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		for _, svc := range s.byPair[b.String()] {
			if svc.Selects(w) {
				out = append(out, svc.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Nodes returns the graph nodes x's edges belong to: its own service name, unless a Service of
// that name exists (callers reach the Service), then every Service that selects it, by name.
// fronted is true when some Service selects x: its own-name node is then not a default
// entrypoint. Without Services it is x's service name alone.
func (s *ServiceSet) Nodes(x *Parsed) (nodes []string, fronted bool) {
	if s == nil {
		return []string{x.service}, false
	}
	fr := s.Fronting(x.Workload)
	if s.Has(x.Workload.Namespace, x.service) {
		return fr, len(fr) > 0
	}
	if len(fr) == 0 {
		return []string{x.service}, false
	}
	return append([]string{x.service}, fr...), true
}
