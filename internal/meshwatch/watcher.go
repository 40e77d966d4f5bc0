package meshwatch

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/retrycap/retrycap/internal/mesh"
)

// syncTimeout bounds the wait for a new informer's first list.
const syncTimeout = 30 * time.Second

// DefaultRecheck is how often the served APIs are discovered again (--mesh-recheck-interval).
const DefaultRecheck = time.Minute

// Options configure a Watcher.
type Options struct {
	// Selection is --mesh-apis.
	Selection Selection
	// Recheck is the discovery interval (zero: DefaultRecheck).
	Recheck time.Duration
	// Mesh are the options of every Set (--istio-default-retries).
	Mesh mesh.Options
	// Log receives the line naming the APIs read, on every change of them.
	Log logr.Logger
}

// Watcher keeps the mesh Set of the cluster. Start it as a manager Runnable (every replica runs
// one: the webhooks read it).
type Watcher struct {
	opts Options
	disc discovery.DiscoveryInterface
	dyn  dynamic.Interface

	set    atomic.Pointer[mesh.Set] // nil: no mesh API read
	apis   atomic.Pointer[[]API]
	synced atomic.Bool

	mu      sync.Mutex // serialises changes of the set and of the informers
	running map[API]*running
	subs    []func(Affected)
	apiSubs []func([]API)
	// istio, linkerd: a mesh API of theirs is read. A Namespace's membership labels and
	// annotations count only for a mesh the cluster has: istio-injection=enabled left behind on
	// a cluster without Istio's CRDs adds no sidecar layer. Guarded by mu.
	istio, linkerd bool
	// nginxCMs are the informers of the ConfigMaps ingress-nginx's controllers name, by
	// "namespace/name" (ingressnginx.go); ctx is Recheck's, which they run under. Guarded by mu.
	nginxCMs map[string]*running
	ctx      context.Context
}

type running struct {
	informer toolscache.SharedIndexInformer
	stop     context.CancelFunc
}

// New returns a Watcher of the cluster cfg points at.
func New(cfg *rest.Config, o Options) (*Watcher, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the discovery client of the mesh watcher: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client of the mesh watcher: %w", err)
	}
	if o.Recheck <= 0 {
		o.Recheck = DefaultRecheck
	}
	return &Watcher{opts: o, disc: disc, dyn: dyn, running: map[API]*running{}}, nil
}

// Set is the current snapshot (nil when no mesh API is read). Never modified once returned: a
// change makes a new Set.
func (w *Watcher) Set() *mesh.Set { return w.set.Load() }

// APIs names the mesh APIs read ("VirtualService networking.istio.io/v1"), in a fixed order;
// empty when none.
func (w *Watcher) APIs() []string {
	if p := w.apis.Load(); p != nil {
		return Names(*p)
	}
	return nil
}

// Read is the mesh APIs read, in a fixed order (nil: none).
func (w *Watcher) Read() []API {
	if p := w.apis.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// OnAPIsChange subscribes f to every change of the APIs read (after the Set is rebuilt for
// them); f must not block.
func (w *Watcher) OnAPIsChange(f func([]API)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.apiSubs = append(w.apiSubs, f)
}

// HasSynced reports whether the first discovery is done and every informer it started has
// listed its objects.
func (w *Watcher) HasSynced() bool { return w.synced.Load() }

// OnChange subscribes f to every change of the Set, with the namespaces whose policies it may
// change. f runs on the watcher's goroutines, after the new Set is in place; it must not block.
func (w *Watcher) OnChange(f func(Affected)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs = append(w.subs, f)
}

// NeedLeaderElection is false: every replica's webhooks read the Set.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Start discovers the APIs, runs their informers, and discovers again every Recheck until ctx
// ends. A failed discovery is logged and retried at the next re-check; the APIs already read
// stay read.
func (w *Watcher) Start(ctx context.Context) error {
	t := time.NewTicker(w.opts.Recheck)
	defer t.Stop()
	for {
		if err := w.Recheck(ctx); err != nil {
			w.opts.Log.Error(err, "discovering the mesh APIs; retrying", "in", w.opts.Recheck.String())
		}
		// Synced after the first attempt even if it failed: the controller then runs without
		// mesh layers until a re-check succeeds (and reconciles every policy), rather than
		// waiting for a discovery that may not come and failing its start.
		w.synced.Store(true)
		select {
		case <-ctx.Done():
			w.mu.Lock()
			for a, r := range w.running {
				r.stop()
				delete(w.running, a)
			}
			for ref, r := range w.nginxCMs {
				r.stop()
				delete(w.nginxCMs, ref)
			}
			w.mu.Unlock()
			return nil
		case <-t.C:
		}
	}
}

// Recheck discovers the served APIs once and starts or stops informers to match, waiting for
// new informers to list their objects.
func (w *Watcher) Recheck(ctx context.Context) error {
	var apis, also []API
	if !w.opts.Selection.None {
		served, err := w.discover()
		if err != nil {
			return err
		}
		apis = Choose(w.opts.Selection, served)
		also = append(waypoints(apis, served), ingressClasses(apis, served)...)
		also = append(also, nginxWorkloads(apis)...) // ingressnginx.go
	}
	also = append(supporting(apis), also...)
	all := append(slices.Clone(apis), also...)

	w.mu.Lock()
	if w.ctx == nil {
		w.ctx = ctx
	}
	started := map[API]*running{}
	changed := len(all) != len(w.running)
	for _, a := range all {
		if _, ok := w.running[a]; ok {
			continue
		}
		changed = true
		r := w.startInformer(ctx, a)
		w.running[a] = r
		started[a] = r
	}
	for a, r := range w.running {
		if !slices.Contains(all, a) {
			r.stop()
			delete(w.running, a)
		}
	}
	w.mu.Unlock()

	// Bounded: an API deleted between discovery and the first list never syncs; its informer is
	// dropped, and the next re-check decides again.
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for a, r := range started {
		if !toolscache.WaitForCacheSync(sctx.Done(), r.informer.HasSynced) {
			w.mu.Lock()
			for b, r := range started {
				if !r.informer.HasSynced() {
					r.stop()
					delete(w.running, b)
				}
			}
			w.mu.Unlock()
			return fmt.Errorf("waiting for the informer of %s to sync: %w", a, sctx.Err())
		}
	}
	if changed || w.apis.Load() == nil {
		w.mu.Lock()
		w.apis.Store(&apis)
		w.istio, w.linkerd = HasMeshes(apis)
		w.rebuild()
		w.mu.Unlock()
		if len(apis) == 0 {
			w.opts.Log.Info("reading no mesh API: none of them is served or selected", "meshAPIs", w.opts.Selection.String())
		} else {
			w.opts.Log.Info("reading mesh retry layers", "apis", Names(apis), "also", Names(also), "recheck", w.opts.Recheck.String())
		}
		w.notify(Affected{All: true})
		w.mu.Lock()
		subs := slices.Clone(w.apiSubs)
		w.mu.Unlock()
		for _, f := range subs {
			f(slices.Clone(apis))
		}
	}
	return nil
}

// discover asks the API server which versions of the candidates' groups it serves and which
// resources those serve: one request for the groups, one per served group version of interest.
func (w *Watcher) discover() (Served, error) {
	groups, err := w.disc.ServerGroups()
	if err != nil {
		return Served{}, fmt.Errorf("listing the API groups: %w", err)
	}
	s := Served{Preferred: map[string]string{}, Versions: map[string][]string{}, Resources: map[string]map[string]bool{}}
	want := map[string]bool{}
	for _, c := range Candidates {
		if w.opts.Selection.wants(c) {
			want[c.Group] = true
			if c.Istio {
				want[mesh.GroupGateway] = true // its ambient waypoints (waypoints)
			}
		}
	}
	for _, g := range groups.Groups {
		if !want[g.Name] {
			continue
		}
		s.Preferred[g.Name] = g.PreferredVersion.Version
		for _, v := range g.Versions {
			s.Versions[g.Name] = append(s.Versions[g.Name], v.Version)
			rl, err := w.disc.ServerResourcesForGroupVersion(v.GroupVersion)
			if err != nil {
				return Served{}, fmt.Errorf("listing the resources of %s: %w", v.GroupVersion, err)
			}
			res := map[string]bool{}
			for _, r := range rl.APIResources {
				res[r.Name] = true
			}
			s.Resources[v.GroupVersion] = res
		}
	}
	return s, nil
}

// startInformer runs an informer of a, trimmed (Trim), feeding the Set. Call with w.mu held.
func (w *Watcher) startInformer(parent context.Context, a API) *running {
	ns, tweak := metav1.NamespaceAll, dynamicinformer.TweakListOptionsFunc(nil)
	if a == configMapsAPI {
		// Only Istio's namespace: its MeshConfigs are istio (the default revision's) and
		// istio-<rev> (a revision's: mesh.IsMeshConfig decides, in the Set, as analyze does), a
		// name no field selector can match. The few other ConfigMaps there (the injector's
		// templates, the CA root) are trimmed to nothing (Trim keeps data.mesh only).
		ns = mesh.IstioConfigNamespace
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(w.dyn, a.GVR(), ns, 0, toolscache.Indexers{}, tweak).Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			return Trim(o), nil
		case toolscache.DeletedFinalStateUnknown:
			if u, ok := o.Obj.(*unstructured.Unstructured); ok {
				o.Obj = Trim(u)
			}
			return o, nil
		}
		return obj, nil
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.apply(inf, nil, obj) },
		UpdateFunc: func(old, obj any) { w.apply(inf, old, obj) },
		DeleteFunc: func(obj any) { w.apply(inf, obj, nil) },
	})
	ctx, cancel := context.WithCancel(parent)
	go inf.RunWithContext(ctx)
	return &running{informer: inf, stop: cancel}
}

// runs reports whether inf is a running informer. Call with w.mu held.
func (w *Watcher) runs(inf toolscache.SharedIndexInformer) bool {
	for _, r := range w.running {
		if r.informer == inf {
			return true
		}
	}
	return false
}

func asUnstructured(obj any) *unstructured.Unstructured {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o
	case toolscache.DeletedFinalStateUnknown:
		u, _ := o.Obj.(*unstructured.Unstructured)
		return u
	}
	return nil
}

// apply puts one change into a new Set. Until the informer has synced, the objects go in
// without notice: Recheck rebuilds the Set from the synced stores and tells of it once.
func (w *Watcher) apply(inf toolscache.SharedIndexInformer, oldObj, newObj any) {
	old, cur := asUnstructured(oldObj), asUnstructured(newObj)
	if old == nil && cur == nil {
		return
	}
	if cur != nil && cur.GetKind() == "Service" && sameButVersion(old, cur) {
		// Every Service is read (its ports); most updates touch nothing the Set reads.
		return
	}
	if u := cmp.Or(cur, old); isNginxWorkload(groupOf(u), u.GetKind()) && !nginxController(old) && !nginxController(cur) {
		// Every workload is read for ingress-nginx's controllers (ingressnginx.go); the
		// others' changes touch nothing the Set reads.
		return
	}
	if !inf.HasSynced() {
		return
	}
	w.mu.Lock()
	prev := w.set.Load()
	if prev == nil || !w.runs(inf) {
		// No Set yet, or a stopped informer's last event: its API's objects are gone.
		w.mu.Unlock()
		return
	}
	next := prev.Clone()
	if old != nil {
		next.Remove(groupOf(old), old.GetKind(), old.GetNamespace(), old.GetName())
	}
	if cur != nil {
		w.add(next, cur)
	}
	w.set.Store(next)
	if u := cur; u != nil && isNginxWorkload(groupOf(u), u.GetKind()) || old != nil && isNginxWorkload(groupOf(old), old.GetKind()) {
		w.syncNginxConfigMaps() // ingressnginx.go: the ConfigMaps the controllers name
	}
	w.mu.Unlock()

	var aff Affected
	for _, u := range []*unstructured.Unstructured{old, cur} {
		if u == nil {
			continue
		}
		a := AffectedBy(u)
		aff.All = aff.All || a.All
		aff.Namespaces = append(aff.Namespaces, a.Namespaces...)
	}
	if aff.All {
		aff.Namespaces = nil
	}
	w.notify(aff)
}

// add adds u to s; an object internal/mesh refuses (a negative attempts) is logged, naming the
// object, the field and the value, and left out: it adds no layer. Call with w.mu held.
func (w *Watcher) add(s *mesh.Set, u *unstructured.Unstructured) {
	u = ForMeshes(u, w.istio, w.linkerd)
	if isNginxWorkload(groupOf(u), u.GetKind()) {
		// An ingress-nginx controller, maybe (ingressnginx.go): not a mesh object of its own.
		js, err := u.MarshalJSON()
		if err == nil {
			_, err = s.AddIngressNginxController(js)
		}
		if err != nil {
			w.opts.Log.Error(err, "ignoring an ingress-nginx controller retrycap cannot read")
		}
		return
	}
	if _, err := s.AddUnstructured(u); err != nil {
		w.opts.Log.Error(err, "ignoring a mesh object retrycap cannot read")
	}
}

// rebuild makes the Set from the running informers' stores (nil when no mesh API is read).
// Call with w.mu held.
func (w *Watcher) rebuild() {
	if p := w.apis.Load(); p == nil || len(*p) == 0 {
		w.set.Store(nil)
		w.syncNginxConfigMaps() // stops them all
		return
	}
	s := mesh.NewSet(w.opts.Mesh)
	for _, r := range w.running {
		for _, obj := range r.informer.GetStore().List() {
			if u := asUnstructured(obj); u != nil {
				w.add(s, u)
			}
		}
	}
	for _, r := range w.nginxCMs {
		for _, obj := range r.informer.GetStore().List() {
			if u := asUnstructured(obj); u != nil {
				w.add(s, u)
			}
		}
	}
	w.set.Store(s)
	w.syncNginxConfigMaps() // ingressnginx.go
}

func (w *Watcher) notify(a Affected) {
	w.mu.Lock()
	subs := slices.Clone(w.subs)
	w.mu.Unlock()
	for _, f := range subs {
		f(a)
	}
}

func groupOf(u *unstructured.Unstructured) string {
	return u.GroupVersionKind().Group
}

// ForMeshes is a Namespace or a Service with only the labels and annotations of the meshes the
// cluster has (istio, linkerd: a mesh API of theirs is read), as the Set holds it: the mesh
// gate judges an incoming one the same way. Any other object is returned as is; u is not modified.
func ForMeshes(u *unstructured.Unstructured, istio, linkerd bool) *unstructured.Unstructured {
	switch u.GetKind() {
	case "Namespace":
		return MembershipOf(u, istio, linkerd)
	case "Service":
		if !linkerd {
			u = WithoutLinkerdRetries(u)
		}
		if !istio {
			u = withoutLabels(u, waypointLabels)
		}
	}
	return u
}

// HasMeshes reports whether apis hold an Istio API and a Linkerd one (ForMeshes's istio, linkerd).
func HasMeshes(apis []API) (istio, linkerd bool) {
	istio = slices.ContainsFunc(apis, func(a API) bool { return candidate(a).Istio })
	linkerd = slices.ContainsFunc(apis, func(a API) bool { return candidate(a).Linkerd })
	return istio, linkerd
}
