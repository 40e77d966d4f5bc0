package index

import (
	"maps"
	"sync"
)

// The namespaces' labels, which a ClusterRetryPolicy's namespaceSelector selects by: fed by a
// metadata-only Namespace informer (kubeobj.FeedIndex), read by the gate (which cluster policies
// select a request's namespace, and which namespaces their graphs span) and by the injector (the
// injection label).

// NamespaceChange is a namespace's labels changing (Change.Namespace): Old nil when it was
// added, New nil when it was removed.
type NamespaceChange struct {
	Name     string
	Old, New map[string]string
	// Removed is true when the namespace is gone (New is then nil).
	Removed bool
}

type nsState struct {
	nsMu sync.RWMutex
	// nsLabels are the labels by namespace name; a namespace without labels has a nil entry.
	// Changed in place: readers hold nsMu (NamespaceLabels hands the map to a function).
	nsLabels map[string]map[string]string
	// nsGen counts the changes to nsLabels: a cluster policy's scope is valid for one.
	nsGen uint64
}

// PutNamespace records a namespace's labels (an informer's add or update). A change of its
// labels, or a new namespace, is told to the subscribers (OnChange) after it is applied; an
// update that keeps the labels (a status or annotation change) tells no one.
func (x *Index) PutNamespace(name string, labels map[string]string) {
	x.nsMu.Lock()
	old, had := x.nsLabels[name]
	if had && maps.Equal(old, labels) {
		x.nsMu.Unlock()
		return
	}
	if x.nsLabels == nil {
		x.nsLabels = map[string]map[string]string{}
	}
	labels = maps.Clone(labels) // the informer's object is not ours
	x.nsLabels[name] = labels
	x.nsGen++
	x.nsMu.Unlock()
	x.namespaceChanged()
	c := &NamespaceChange{Name: name, New: labels}
	if had {
		c.Old = old
		if c.Old == nil {
			c.Old = map[string]string{}
		}
	}
	if c.New == nil {
		c.New = map[string]string{}
	}
	x.notify(Change{Namespace: c})
}

// RemoveNamespace forgets a namespace (an informer's delete) and tells the subscribers.
func (x *Index) RemoveNamespace(name string) {
	x.nsMu.Lock()
	old, had := x.nsLabels[name]
	if !had {
		x.nsMu.Unlock()
		return
	}
	delete(x.nsLabels, name)
	x.nsGen++
	x.nsMu.Unlock()
	x.namespaceChanged()
	if old == nil {
		old = map[string]string{}
	}
	x.notify(Change{Namespace: &NamespaceChange{Name: name, Old: old, Removed: true}})
}

// Namespace returns a namespace's labels (shared: read only), and whether the index knows it.
func (x *Index) Namespace(name string) (map[string]string, bool) {
	x.nsMu.RLock()
	defer x.nsMu.RUnlock()
	l, ok := x.nsLabels[name]
	return l, ok
}

// NamespaceLabels calls f with every namespace's labels by name, and the generation of the
// labels, under the index's read lock: f must not keep the map, nor call the index's writers.
func (x *Index) NamespaceLabels(f func(labels map[string]map[string]string, gen uint64)) {
	x.nsMu.RLock()
	defer x.nsMu.RUnlock()
	f(x.nsLabels, x.nsGen)
}
