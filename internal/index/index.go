package index

import (
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// Index holds every workload the gate may need, by namespace, fed by the manager's informers
// (through Put and Remove; internal/webhook registers the handlers), together with the service-level call graph of all of them (selected by a policy or
// not). An admission request reads only the part of a namespace that can matter to it
// (Relevant), so its cost follows the size of the workload's chains, not of the namespace.
// Updates that do not touch a workload's labels or annotations (status, replicas, images) leave
// the index alone.
type Index struct {
	mu   sync.RWMutex
	byNS map[string]*nsWorkloads

	syncedMu sync.Mutex
	synced   []func() bool

	// subscribers are told of every change (OnChange), after it is applied.
	subMu       sync.RWMutex
	subscribers []func(Change)

	// The prepared graphs' refresh (see bases.go).
	dirtyMu sync.Mutex
	dirty   map[string]bool // namespaces whose prepared graphs a change made stale
	wake    chan struct{}   // capacity 1: a change is waiting for refresh
	// baseIdle is how long a prepared graph no request uses is kept fresh; then refresh drops it.
	baseIdle time.Duration

	// The namespaces' labels (namespaces.go), which ClusterRetryPolicies select by; and the
	// cluster policies' prepared state (cluster.go).
	nsState
	clusterState
	meshState // the mesh layers of the prepared graphs (mesh.go)

	// jobCronJobs are the Jobs a CronJob controls, "ns/job" -> the CronJob (under mu).
	jobCronJobs map[string]string
}

type nsWorkloads struct {
	// items are the parsed workloads by Workload.Key(): a request parses only its own object.
	// A *workload.Parsed is immutable; an update replaces it.
	items map[string]*workload.Parsed
	// sorted are the same, sorted by workload.Compare (the order Build processes them in) with
	// their service's id, kept in place under the write lock so that a request over most of the
	// namespace need not sort.
	sorted []sortedEntry
	// The service-level call graph of all the workloads, by service id: slices, not maps of
	// maps, so that a request walking thousands of services does no hashing per edge.
	ids      map[string]int32
	services []service
	free     []int32 // ids of services that have gone, for reuse
	// refs counts the services named "name.other" by the other namespace they name: a cluster
	// policy's walk upwards looks for callers of a service of other only in the namespaces
	// that have such a name (cluster_reach.go).
	refs map[string]int32
	list []workload.Workload // nil: rebuild on next read; read-only once built
	// set is the namespace's Services indexed for the builder (nil: none). Changed in place
	// until it is handed out (setShared: a request or a prepared graph being built outside the
	// lock may hold it), then copied on the next change (ownSet).
	set       *workload.ServiceSet
	setShared atomic.Bool
	// gen counts the changes to items: a policy's prepared graph (bases) is valid for one.
	gen uint64
	// bases are the policies' prepared graphs of the namespace, by policy namespace/name.
	bases map[string]*preparedBase
}

type sortedEntry struct {
	p *workload.Parsed
	// nodes are the ids of the nodes p's edges belong to (workload.ServiceSet.Nodes): its
	// service name's alone without Services; none when a Service shadows that name without
	// selecting it.
	nodes []int32
}

type service struct {
	name    string
	out, in []edgeCount
	// keys are the workloads that provide the service (are reached under its name), in no
	// order: a slice, not a set, since a service is provided by one workload or a few (a
	// Go map of one entry costs ~300 bytes, and there is one per service), and removal
	// compares pointers (an entry's *workload.Parsed is the one link added).
	keys []*workload.Parsed
}

// edgeCount is a neighbour and the number of workloads declaring the edge.
type edgeCount struct{ to, n int32 }

// NewIndex returns an empty index; HasSynced is false until a first AddSynced.
func New() *Index {
	return &Index{byNS: map[string]*nsWorkloads{}, dirty: map[string]bool{}, wake: make(chan struct{}, 1), baseIdle: defaultBaseIdle}
}

// Workloads returns all of the namespace's workloads, sorted by key. The slice is shared: read
// only. The validator uses it; the gate uses RelevantParsed.
func (x *Index) Workloads(ns string) []workload.Workload {
	x.mu.RLock()
	n := x.byNS[ns]
	if n == nil {
		x.mu.RUnlock()
		return nil
	}
	if l := n.list; l != nil {
		x.mu.RUnlock()
		return l
	}
	x.mu.RUnlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if n.list == nil {
		l := make([]workload.Workload, 0, len(n.items))
		for _, e := range n.items {
			l = append(l, e.Workload)
		}
		sort.Slice(l, func(i, j int) bool { return l[i].Key() < l[j].Key() })
		n.list = l
	}
	return n.list
}

// Has reports whether namespace ns holds workload kind/name.
func (x *Index) Has(kind, ns, name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.has(kind, ns, name)
}

func (x *Index) has(kind, ns, name string) bool {
	n := x.byNS[ns]
	return n != nil && n.items[workload.Workload{Kind: kind, Namespace: ns, Name: name}.Key()] != nil
}

// SetJobCronJob records that CronJob cronJob controls Job job of namespace ns ("" forgets the
// Job): kubeobj.FeedIndex calls it from the Jobs the cache holds as owned (kubeobj.OwnedObject).
// A CronJob keeps a few finished Jobs (its history limits), so this stays small.
func (x *Index) SetJobCronJob(ns, job, cronJob string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := ns + "/" + job
	if cronJob == "" {
		delete(x.jobCronJobs, k)
		return
	}
	if x.jobCronJobs == nil {
		x.jobCronJobs = map[string]string{}
	}
	x.jobCronJobs[k] = cronJob
}

// CronJobOf is the CronJob whose pods' workload Job job of namespace ns is
// (workload.CronJobOfJob: its controller when the cache has the Job, else by its name): the
// injector's workload.ForPodIn.
func (x *Index) CronJobOf(ns, job string) (string, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return workload.CronJobOfJob(job, x.jobCronJobs[ns+"/"+job], func(kind, name string) bool { return x.has(kind, ns, name) })
}

// RelevantParsed returns the workloads of ns that can change the gate's judgement of a workload
// of service svc whose upstreams are ups, parsed and sorted by workload.Compare: those providing
// svc, every service that reaches svc, and every service reachable from svc or from ups, in the
// call graph of all the namespace's workloads. graph.Judge and graph.PlanLocal depend only on the
// paths into svc (so on its ancestors and, for default entrypoints, their callers, which are
// ancestors too) and the paths below its upstreams (their descendants); a policy's graph is a
// subgraph of this one, so the set is a superset of what any policy needs and the judgement is
// the same as over the whole namespace (TestRelevantMatchesWholeNamespace checks this on random
// graphs). The slice is the caller's; the workloads are shared and immutable.
func (x *Index) RelevantParsed(ns string, svcs, ups []string) []*workload.Parsed {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := x.byNS[ns]
	if n == nil {
		return nil
	}
	seen, visited := n.reach(svcs, ups)
	count := 0
	for _, id := range visited {
		count += len(n.services[id].keys)
	}
	if count == 0 {
		return nil
	}
	out := make([]*workload.Parsed, 0, count)
	if count > len(n.sorted)/8 {
		// Much of the namespace (a service everything reaches): filtering the sorted list is
		// cheaper than sorting the subset.
		for _, e := range n.sorted {
			for _, id := range e.nodes {
				if seen[id] != 0 {
					out = append(out, e.p)
					break
				}
			}
		}
		return out
	}
	for _, id := range visited {
		out = append(out, n.services[id].keys...)
	}
	slices.SortFunc(out, func(a, b *workload.Parsed) int { return workload.Compare(a.Workload, b.Workload) })
	// A workload reached under several nodes (a Service and its own name) was listed once per
	// node reached.
	return slices.CompactFunc(out, func(a, b *workload.Parsed) bool { return a == b })
}

// reach marks the services of n that reach one of svcs (up) or that svcs or ups reach (down),
// and lists each once in visited, so that what follows costs what was reached (see
// RelevantParsed).
func (n *nsWorkloads) reach(svcs, ups []string) (seen []uint8, visited []int32) {
	// A bit per direction: a service above svc may also lie below one of its upstreams (a
	// cycle), and must then be walked downwards too.
	const up, down = 1, 2
	seen = make([]uint8, len(n.services))
	var stack []int32
	reach := func(dir uint8) {
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[v]&dir != 0 {
				continue
			}
			if seen[v] == 0 {
				visited = append(visited, v)
			}
			seen[v] |= dir
			next := n.services[v].out
			if dir == up {
				next = n.services[v].in
			}
			for _, e := range next {
				if seen[e.to]&dir == 0 {
					stack = append(stack, e.to)
				}
			}
		}
	}
	for _, svc := range svcs {
		if start, ok := n.ids[svc]; ok {
			stack = append(stack, start)
		}
	}
	reach(up)
	for _, svc := range svcs {
		if start, ok := n.ids[svc]; ok {
			stack = append(stack, start)
		}
	}
	for _, u := range ups {
		if id, ok := n.ids[u]; ok {
			stack = append(stack, id)
		}
	}
	reach(down)
	return seen, visited
}

// Len is the number of indexed workloads in ns.
func (x *Index) Len(ns string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if n := x.byNS[ns]; n != nil {
		return len(n.items)
	}
	return 0
}

func sameWorkload(a, b workload.Workload) bool {
	return a.Same(b)
}

// Change is one change the index applied: a workload's (Old and New), a Service's (Service) or
// a namespace's labels (Namespace).
type Change struct {
	// Old and New are a changed workload's versions: Old nil for an add, New nil for a removal;
	// both nil for a Service change.
	Old, New *workload.Workload
	// Service is a changed Service (its new version, or the removed one); nil for a workload
	// change. Which workloads it fronts, and so which policies' graphs it changes, is the graph's
	// to say: a subscriber treats it as a change to every policy of its namespace.
	Service *workload.Service
	// Namespace is a namespace whose labels changed (or that came or went); nil otherwise. The
	// ClusterRetryPolicies whose namespaceSelector selected it before or selects it now are the
	// ones it changes.
	Namespace *NamespaceChange
}

// OnChange adds f to the functions told of each change the index applies, after it applied it
// (so f reads the index as changed): a workload's put or removal, or a Service's. f runs on the
// informer's goroutine: it must be quick (the controller enqueues requests). A Put or PutService
// that changes nothing (same labels and annotations; same selector and type) tells no one.
func (x *Index) OnChange(f func(Change)) {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	x.subscribers = append(x.subscribers, f)
}

func (x *Index) notify(c Change) {
	x.subMu.RLock()
	defer x.subMu.RUnlock()
	for _, f := range x.subscribers {
		f(c)
	}
}

// Parsed returns the namespace's workloads, parsed and sorted by workload.Compare (the order
// workload.BuildParsed wants): the controller builds a policy's graph from them without listing,
// converting or parsing the namespace. The slice is the caller's; the workloads are shared and
// immutable.
func (x *Index) Parsed(ns string) []*workload.Parsed {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := x.byNS[ns]
	if n == nil {
		return nil
	}
	out := make([]*workload.Parsed, len(n.sorted))
	for i, e := range n.sorted {
		out[i] = e.p
	}
	return out
}

// Put adds or replaces w (an informer's add or update).
func (x *Index) Put(w workload.Workload) {
	if old, changed := x.put(w); changed {
		x.notify(Change{Old: old, New: &w})
	}
}

func (x *Index) put(w workload.Workload) (*workload.Workload, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.ns(w.Namespace)
	key := w.Key()
	if prev, ok := n.items[key]; ok && sameWorkload(prev.Workload, w) {
		return nil, false
	}
	e := workload.Parse(w)
	var old *workload.Workload
	if prev, ok := n.items[key]; ok {
		old = &prev.Workload
		i := n.position(prev) // same key, same place
		n.unlink(n.sorted[i])
		n.sorted[i] = sortedEntry{e, n.link(e)}
	} else {
		n.sorted = slices.Insert(n.sorted, n.position(e), sortedEntry{e, n.link(e)})
	}
	n.items[e.Key()] = e // the parsed entry's key: one copy of the string, not two
	n.list = nil
	n.changed(x, w.Namespace)
	return old, true
}

// Remove forgets w (an informer's delete, or a Pod that gained a controller).
func (x *Index) Remove(w workload.Workload) {
	if old := x.remove(w); old != nil {
		x.notify(Change{Old: old})
	}
}

func (x *Index) remove(w workload.Workload) *workload.Workload {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.byNS[w.Namespace]
	if n == nil {
		return nil
	}
	key := w.Key()
	prev, ok := n.items[key]
	if !ok {
		return nil
	}
	i := n.position(prev)
	n.unlink(n.sorted[i])
	delete(n.items, key)
	n.sorted = slices.Delete(n.sorted, i, i+1)
	n.list = nil
	n.changed(x, w.Namespace)
	if len(n.items) == 0 && n.set == nil {
		delete(x.byNS, w.Namespace)
	}
	return &prev.Workload
}

// ns returns namespace ns's entry, adding it if need be. Called with x.mu held for writing.
func (x *Index) ns(ns string) *nsWorkloads {
	n := x.byNS[ns]
	if n == nil {
		n = &nsWorkloads{items: map[string]*workload.Parsed{}, ids: map[string]int32{}}
		x.byNS[ns] = n
	}
	return n
}

// Services returns ns's Services indexed for the builder; nil when it has none. Shared and
// immutable.
func (x *Index) Services(ns string) *workload.ServiceSet {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if n := x.byNS[ns]; n != nil {
		return n.sharedSet()
	}
	return nil
}

// Nodes returns the nodes w's edges belong to in its namespace (workload.ServiceSet.Nodes):
// where a request about w starts its walk.
func (x *Index) Nodes(w workload.Workload) []string {
	set := x.Services(w.Namespace)
	if set == nil {
		return []string{w.ServiceName()}
	}
	nodes, _ := set.Nodes(workload.Parse(w))
	return nodes
}

// PutService adds or replaces a Service (an informer's add or update). A change to its selector
// or type relinks the workloads it selected or selects, and those of its name, and makes the
// namespace's prepared graphs stale, like a workload change.
// Its subscribers (OnChange) are told after it is applied.
func (x *Index) PutService(s workload.Service) {
	if x.putService(s) {
		x.notify(Change{Service: &s})
	}
}

func (x *Index) putService(s workload.Service) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.ns(s.Namespace)
	old, had := n.set.Get(s.Namespace, s.Name)
	if had && old.ExternalName == s.ExternalName && maps.Equal(old.Selector, s.Selector) {
		return false
	}
	n.ownSet().Put(s)
	n.servicesChanged(x, s.Namespace, s, old, had)
	return true
}

// RemoveService forgets a Service (an informer's delete). Its subscribers (OnChange) are told
// after it is applied.
func (x *Index) RemoveService(s workload.Service) {
	if old, ok := x.removeService(s); ok {
		x.notify(Change{Service: &old})
	}
}

func (x *Index) removeService(s workload.Service) (workload.Service, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := x.byNS[s.Namespace]
	if n == nil {
		return workload.Service{}, false
	}
	old, had := n.set.Get(s.Namespace, s.Name)
	if !had {
		return workload.Service{}, false
	}
	n.ownSet().Remove(s.Namespace, s.Name)
	if n.set.Len() == 0 {
		n.set = nil
	}
	n.servicesChanged(x, s.Namespace, old, old, true)
	if len(n.items) == 0 && n.set == nil {
		delete(x.byNS, s.Namespace)
	}
	return old, true
}

// ownSet returns n.set to change in place: a copy if it has been handed out since the last
// change (a request or a prepared graph may be reading it), so that the informer's initial list
// of thousands of Services costs one insert each, not a copy of the set each. Called with x.mu
// held for writing.
func (n *nsWorkloads) ownSet() *workload.ServiceSet {
	switch {
	case n.set == nil:
		n.set = &workload.ServiceSet{}
	case n.setShared.Load():
		n.set = n.set.Clone()
	}
	n.setShared.Store(false)
	return n.set
}

// sharedSet returns n.set, marked as handed out. Called with x.mu held at least for reading.
func (n *nsWorkloads) sharedSet() *workload.ServiceSet {
	if n.set != nil && !n.setShared.Load() {
		n.setShared.Store(true)
	}
	return n.set
}

// servicesChanged relinks the workloads whose nodes the change of Service now (was old, if had)
// can move: those either version selects, and those whose service name is its name. O(workloads
// of the namespace) per change. Called with x.mu held for writing.
func (n *nsWorkloads) servicesChanged(x *Index, ns string, now, old workload.Service, had bool) {
	for i, e := range n.sorted {
		w := e.p.Workload
		if now.Selects(w) || had && old.Selects(w) || e.p.ServiceName() == now.Name {
			n.unlink(e)
			n.sorted[i].nodes = n.link(e.p)
		}
	}
	n.changed(x, ns)
}

// position is where e is, or belongs, in n.sorted.
func (n *nsWorkloads) position(e *workload.Parsed) int {
	i, _ := slices.BinarySearchFunc(n.sorted, e, func(a sortedEntry, b *workload.Parsed) int {
		return workload.Compare(a.p.Workload, b.Workload)
	})
	return i
}

// id returns the service's id, adding the service if need be.
func (n *nsWorkloads) id(name string) int32 {
	if id, ok := n.ids[name]; ok {
		return id
	}
	var id int32
	if k := len(n.free); k > 0 {
		id, n.free = n.free[k-1], n.free[:k-1]
		n.services[id] = service{name: name}
	} else {
		id = int32(len(n.services))
		n.services = append(n.services, service{name: name})
	}
	n.ids[name] = id
	if _, other, ok := annotations.SplitService(name); ok {
		if n.refs == nil {
			n.refs = map[string]int32{}
		}
		n.refs[other]++
	}
	return id
}

// release forgets a service nothing provides or calls any more, so that names that come and go
// do not grow the table.
func (n *nsWorkloads) release(id int32) {
	s := &n.services[id]
	if s.name != "" && len(s.keys) == 0 && len(s.out) == 0 && len(s.in) == 0 {
		delete(n.ids, s.name)
		if _, other, ok := annotations.SplitService(s.name); ok {
			if n.refs[other]--; n.refs[other] <= 0 {
				delete(n.refs, other)
			}
		}
		*s = service{}
		n.free = append(n.free, id)
	}
}

// link adds e's nodes (workload.ServiceSet.Nodes) and their edges; it returns the nodes' ids.
func (n *nsWorkloads) link(e *workload.Parsed) []int32 {
	names, _ := n.set.Nodes(e)
	ids := make([]int32, len(names))
	for i, name := range names {
		from := n.id(name)
		ids[i] = from
		n.services[from].keys = append(n.services[from].keys, e)
		for _, u := range e.UpstreamNames() {
			to := n.id(u)
			n.services[from].out = addCount(n.services[from].out, to)
			n.services[to].in = addCount(n.services[to].in, from)
		}
	}
	return ids
}

// unlink removes what link added for e.
func (n *nsWorkloads) unlink(e sortedEntry) {
	ups := e.p.UpstreamNames()
	tos := make([]int32, len(ups))
	for i, u := range ups {
		tos[i] = n.ids[u]
	}
	for _, from := range e.nodes {
		n.services[from].keys = dropKey(n.services[from].keys, e.p)
		for _, to := range tos {
			n.services[from].out = dropCount(n.services[from].out, to)
			n.services[to].in = dropCount(n.services[to].in, from)
		}
	}
	// Released once every edge is gone: a node may be an upstream of another of e's nodes.
	for _, to := range tos {
		n.release(to)
	}
	for _, from := range e.nodes {
		n.release(from)
	}
}

// dropKey removes p from keys (order does not matter: the last entry takes its place).
func dropKey(keys []*workload.Parsed, p *workload.Parsed) []*workload.Parsed {
	for i, k := range keys {
		if k == p {
			last := len(keys) - 1
			keys[i] = keys[last]
			keys[last] = nil
			if last == 0 {
				return nil
			}
			return keys[:last]
		}
	}
	return keys
}

func addCount(es []edgeCount, to int32) []edgeCount {
	for i := range es {
		if es[i].to == to {
			es[i].n++
			return es
		}
	}
	return append(es, edgeCount{to: to, n: 1})
}

func dropCount(es []edgeCount, to int32) []edgeCount {
	for i := range es {
		if es[i].to == to {
			if es[i].n--; es[i].n <= 0 {
				return slices.Delete(es, i, i+1)
			}
			return es
		}
	}
	return es
}

// HasSynced reports whether every informer feeding the index has delivered its initial list.
func (x *Index) HasSynced() bool {
	x.syncedMu.Lock()
	defer x.syncedMu.Unlock()
	if len(x.synced) == 0 {
		return false
	}
	for _, s := range x.synced {
		if !s() {
			return false
		}
	}
	return true
}

// AddSynced adds an informer's HasSynced to those HasSynced waits for.
func (x *Index) AddSynced(f func() bool) {
	x.syncedMu.Lock()
	defer x.syncedMu.Unlock()
	x.synced = append(x.synced, f)
}
