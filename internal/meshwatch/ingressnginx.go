package meshwatch

import (
	"context"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/retrycap/retrycap/internal/mesh"
)

// ingress-nginx's controllers and their ConfigMaps (mesh/ingressnginx_config.go): with the
// Ingresses, the apps/v1 Deployments, DaemonSets and StatefulSets are read, trimmed to their
// containers' image, command, args and env (which controller, which --configmap); and each
// ConfigMap a controller names is read by an informer of its own, on that namespace and a field
// selector of that name: no other ConfigMap of the cluster is listed.

// nginxWorkloadAPIs are the workloads read for ingress-nginx's controllers.
var nginxWorkloadAPIs = []API{
	{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Resource: "daemonsets", Kind: "DaemonSet"},
	{Group: "apps", Version: "v1", Resource: "statefulsets", Kind: "StatefulSet"},
}

// nginxWorkloads returns the workload APIs when the Ingresses are read (every cluster serves
// apps/v1).
func nginxWorkloads(apis []API) []API {
	if !slices.ContainsFunc(apis, func(a API) bool { return candidate(a).Ingress }) {
		return nil
	}
	return slices.Clone(nginxWorkloadAPIs)
}

// isNginxWorkload reports whether u is one of nginxWorkloadAPIs' kinds.
func isNginxWorkload(group, kind string) bool {
	return group == "apps" && slices.Contains(mesh.IngressNginxWorkloadKinds, kind)
}

// syncNginxConfigMaps starts an informer for each ConfigMap the Set's controllers name and stops
// those no controller names any more. Call with w.mu held, after the Set changed.
func (w *Watcher) syncNginxConfigMaps() {
	var want []string
	if s := w.set.Load(); s != nil {
		want = s.IngressNginxConfigMaps()
	}
	if w.nginxCMs == nil {
		w.nginxCMs = map[string]*running{}
	}
	for ref, r := range w.nginxCMs {
		if !slices.Contains(want, ref) {
			r.stop()
			delete(w.nginxCMs, ref)
			if s := w.set.Load(); s != nil {
				ns, name, _ := strings.Cut(ref, "/")
				next := s.Clone()
				if next.Remove("", "ConfigMap", ns, name) {
					w.set.Store(next)
				}
			}
		}
	}
	if w.ctx == nil {
		return // not started: Recheck starts them
	}
	for _, ref := range want {
		if _, ok := w.nginxCMs[ref]; ok {
			continue
		}
		ns, name, _ := strings.Cut(ref, "/")
		tweak := func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}
		inf := dynamicinformer.NewFilteredDynamicInformer(w.dyn, configMapsAPI.GVR(), ns, 0, toolscache.Indexers{}, tweak).Informer()
		_ = inf.SetTransform(func(obj any) (any, error) {
			if u := asUnstructured(obj); u != nil {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					d.Obj = Trim(u)
					return d, nil
				}
				return Trim(u), nil
			}
			return obj, nil
		})
		_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.applyNginxConfigMap(inf, nil, obj) },
			UpdateFunc: func(old, obj any) { w.applyNginxConfigMap(inf, old, obj) },
			DeleteFunc: func(obj any) { w.applyNginxConfigMap(inf, obj, nil) },
		})
		ctx, cancel := context.WithCancel(w.ctx)
		go inf.RunWithContext(ctx)
		w.nginxCMs[ref] = &running{informer: inf, stop: cancel}
	}
}

// applyNginxConfigMap puts a change of a named ConfigMap into a new Set, synced or not: the
// informer starts after the Set is built, so no rebuild would bring its first objects.
func (w *Watcher) applyNginxConfigMap(inf toolscache.SharedIndexInformer, oldObj, newObj any) {
	old, cur := asUnstructured(oldObj), asUnstructured(newObj)
	if old == nil && cur == nil {
		return
	}
	w.mu.Lock()
	prev := w.set.Load()
	mine := false
	for _, r := range w.nginxCMs {
		mine = mine || r.informer == inf
	}
	if prev == nil || !mine {
		w.mu.Unlock()
		return
	}
	next := prev.Clone()
	if old != nil {
		next.Remove("", "ConfigMap", old.GetNamespace(), old.GetName())
	}
	if cur != nil {
		w.add(next, cur)
	}
	w.set.Store(next)
	w.mu.Unlock()
	// Every Ingress its controller serves may change, in any namespace.
	w.notify(Affected{All: true})
}

// nginxController reports whether u (nil: no) runs ingress-nginx's controller.
func nginxController(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	js, err := u.MarshalJSON()
	return err == nil && mesh.IsIngressNginxController(js)
}
