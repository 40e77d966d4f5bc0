// Package meshwatch is the manager's adapter between the cluster and internal/mesh: it discovers
// which of the mesh APIs retrycap reads the cluster serves (at start and every re-check
// interval), runs an informer only for those (objects trimmed in the cache to the fields
// internal/mesh reads), and keeps the current *mesh.Set as a copy-on-write snapshot that any
// number of readers (both reconcilers, the admission webhooks, the index) share without
// locks. Every change of the set is told to the subscribers with the namespaces whose policies
// it may change; every change of the set of APIs read is logged once.
//
// With none of the APIs selected (--mesh-apis=none, or a list the cluster does not serve) it
// starts no informer and Set returns nil: the manager then runs exactly as without mesh layers.
// Every cluster serves the Ingresses (ingress-nginx's layer), so under auto a cluster without a
// mesh still runs their informers (Ingress, IngressClass; the Deployments, DaemonSets and
// StatefulSets, a workload that does not run ingress-nginx's controller cached as its name;
// and one field-selected informer per ConfigMap a controller's configmap flag names:
// ingressnginx.go), and no Namespace or Service one.
// With Istio's API it also reads istio-system's ConfigMaps (the MeshConfigs, a revision's
// istio-<rev> too: mesh.IsMeshConfig decides, as analyze does).
//
// The logic stays in internal/mesh; this package only chooses the APIs (apis.go, pure), trims
// objects (trim.go, pure) and feeds informers' objects into Sets (watcher.go, ingressnginx.go).
package meshwatch
