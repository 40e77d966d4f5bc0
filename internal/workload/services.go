package workload

import (
	"maps"
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
		if lv, ok := w.Labels.Lookup(k); !ok || lv != v {
			return false
		}
	}
	return true
}

// ServiceSet is the Services of a graph's input, indexed so that finding the Services that
// front a workload costs the workload's labels, not the number of Services. A nil *ServiceSet
// has no Services: every workload is its own service name's node, as before Services. Immutable
// once shared (NewServiceSet's, and With's and Without's results are new sets): share it freely.
type ServiceSet struct {
	byName map[string]*Service // namespace/name
	// byPair are the selecting Services by one of their selector pairs (the smallest key):
	// "namespace/key=value" -> Services; a workload can only be selected by a Service whose
	// pair it has. A slice is replaced, never modified, so that a copy of the map may share it.
	byPair map[string][]*Service
}

// NewServiceSet indexes svcs (a later Service of the same namespace and name replaces an
// earlier one); nil when svcs is empty.
func NewServiceSet(svcs []Service) *ServiceSet {
	if len(svcs) == 0 {
		return nil
	}
	s := &ServiceSet{byName: make(map[string]*Service, len(svcs)), byPair: map[string][]*Service{}}
	for _, v := range svcs {
		s.Put(v)
	}
	return s
}

// Clone returns a copy of s that Put and Remove may change without changing s; nil for nil.
func (s *ServiceSet) Clone() *ServiceSet {
	if s == nil {
		return nil
	}
	return &ServiceSet{byName: maps.Clone(s.byName), byPair: maps.Clone(s.byPair)}
}

// Put adds or replaces v in s (the zero ServiceSet is an empty one), which must not be shared
// (see Clone): for a caller that keeps a set up to date one Service at a time (the shared workload index). O(Services with v's selector pair).
func (s *ServiceSet) Put(v Service) {
	if s.byName == nil {
		s.byName, s.byPair = map[string]*Service{}, map[string][]*Service{}
	}
	s.Remove(v.Namespace, v.Name)
	p := &v
	s.byName[v.Namespace+"/"+v.Name] = p
	if k, ok := pairKey(p); ok {
		s.byPair[k] = append(slices.Clip(s.byPair[k]), p)
	}
}

// Remove deletes Service ns/name from s, which must not be shared (see Clone).
func (s *ServiceSet) Remove(ns, name string) {
	old, ok := s.byName[ns+"/"+name]
	if !ok {
		return
	}
	delete(s.byName, ns+"/"+name)
	if k, ok := pairKey(old); ok {
		l := slices.DeleteFunc(slices.Clone(s.byPair[k]), func(x *Service) bool { return x == old })
		if len(l) == 0 {
			delete(s.byPair, k)
		} else {
			s.byPair[k] = l
		}
	}
}

// pairKey is v's key in byPair; false for a leaf.
func pairKey(v *Service) (string, bool) {
	if v.Leaf() {
		return "", false
	}
	k := minKey(v.Selector)
	return v.Namespace + "/" + k + "=" + v.Selector[k], true
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
	return len(s.byName)
}

// List returns the Services sorted by namespace and name (a new slice).
func (s *ServiceSet) List() []Service {
	if s == nil {
		return nil
	}
	out := make([]Service, 0, len(s.byName))
	for _, v := range s.byName {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return out
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
	if s == nil || w.Labels.Len() == 0 {
		return nil
	}
	var out []string
	var b strings.Builder
	for k, v := range w.Labels.All() {
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
