package kubeobj

import (
	"reflect"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/workload"
)

func TestWorkloadOf(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "order"}
	owned := meta
	yes := true
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "order-abc", UID: "1", Controller: &yes}}
	tests := []struct {
		name     string
		obj      any
		wantKind string // "" for not a workload
	}{
		{"deployment", &appsv1.Deployment{ObjectMeta: meta}, workload.KindDeployment},
		{"statefulset", &appsv1.StatefulSet{ObjectMeta: meta}, workload.KindStatefulSet},
		{"daemonset", &appsv1.DaemonSet{ObjectMeta: meta}, workload.KindDaemonSet},
		{"bare pod", &corev1.Pod{ObjectMeta: meta}, workload.KindPod},
		{"bare pod as metadata", &metav1.PartialObjectMetadata{ObjectMeta: meta}, workload.KindPod},
		{"owned pod as metadata", &metav1.PartialObjectMetadata{ObjectMeta: owned}, ""},
		{"owned pod", &corev1.Pod{ObjectMeta: owned}, ""},
		{"tombstone", toolscache.DeletedFinalStateUnknown{Key: "shop/order", Obj: &appsv1.Deployment{ObjectMeta: meta}}, workload.KindDeployment},
		{"other kind", &corev1.Service{ObjectMeta: meta}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, ok := WorkloadOf(tt.obj)
			if ok != (tt.wantKind != "") || (ok && (w.Kind != tt.wantKind || w.Namespace != "shop" || w.Name != "order")) {
				t.Fatalf("WorkloadOf = %+v, %v; want kind %q", w, ok, tt.wantKind)
			}
		})
	}
}

func TestTrimForCache(t *testing.T) {
	yes := true
	replicas := int32(3)
	meta := metav1.ObjectMeta{
		Namespace: "shop", Name: "order", UID: "u1", ResourceVersion: "7", Generation: 2,
		Labels:          map[string]string{"team": "a"},
		Annotations:     map[string]string{LastAppliedAnnotation: `{"big":"spec"}`, "deployment.kubernetes.io/revision": "4"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "x", UID: "2", Controller: &yes}},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "order"}, Annotations: map[string]string{"retrycap.dev/upstreams": "payment:3"}, GenerateName: "g"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: tmpl}, Status: appsv1.DeploymentStatus{Replicas: 3}}
	got, err := TrimForCache(d)
	if err != nil {
		t.Fatal(err)
	}
	want := &CachedWorkload{Kind: workload.KindDeployment, Namespace: "shop", Name: "order",
		Labels: workload.PairsOf(map[string]string{"app.kubernetes.io/name": "order"}), Annotations: workload.PairsOf(map[string]string{"retrycap.dev/upstreams": "payment:3"})}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("trimmed Deployment:\n got %+v\nwant %+v", got, want)
	}
	// What the cache holds per workload besides its pairs' backing arrays
	// (docs/benchmarks/manager-scale.md): three strings, two slice headers and the pointer to
	// what is read of the spec (nil for most workloads).
	if size := unsafe.Sizeof(CachedWorkload{}); size != 104 {
		t.Fatalf("CachedWorkload is %d bytes, want 104", size)
	}
	if w1, _ := WorkloadOf(d); !reflect.DeepEqual(w1, mustWorkload(t, got)) {
		t.Fatalf("trimming changed the workload: %+v vs %+v", w1, mustWorkload(t, got))
	}
	for _, obj := range []any{&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Template: tmpl}}, &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Template: tmpl}}} {
		got, _ := TrimForCache(obj)
		w := mustWorkload(t, got)
		if w.Labels.Get("app.kubernetes.io/name") != "order" || w.Annotations.Get("retrycap.dev/upstreams") != "payment:3" {
			t.Fatalf("%T: workload %+v", obj, w)
		}
	}
	// Only the annotations retrycap reads are kept; an object of the informer's (its key) is
	// what the store needs.
	noisy := tmpl.DeepCopy()
	noisy.Annotations = map[string]string{"prometheus.io/scrape": "true", "retrycap.dev/service": "orders",
		"sidecar.istio.io/inject": "true", "linkerd.io/inject": "enabled", "checksum/config": "abc"}
	got, _ = TrimForCache(&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: *noisy}})
	if a := got.(*CachedWorkload).Annotations.Map(); !reflect.DeepEqual(a, map[string]string{"retrycap.dev/service": "orders",
		"sidecar.istio.io/inject": "true", "linkerd.io/inject": "enabled"}) {
		t.Fatalf("kept template annotations %v", a)
	}
	if key, err := toolscache.MetaNamespaceKeyFunc(got); err != nil || key != "shop/order" {
		t.Fatalf("informer key of the cached workload = %q, %v; want shop/order", key, err)
	}
	if cp := got.(*CachedWorkload).DeepCopyObject().(*CachedWorkload); !reflect.DeepEqual(cp, got) || cp.GetObjectKind().GroupVersionKind().String() != "apps/v1, Kind=Deployment" {
		t.Fatalf("deep copy %+v (kind %v) of %+v", cp, cp.GetObjectKind().GroupVersionKind(), got)
	}
	got, _ = TrimForCache(&appsv1.Deployment{ObjectMeta: meta})
	if c := got.(*CachedWorkload); c.Labels.Len() != 0 || c.Annotations.Len() != 0 {
		t.Fatalf("workload without template metadata cached as %+v", c)
	}
	// A Pod a controller owns is no workload: its identity and owners only.
	owned := &metav1.PartialObjectMetadata{ObjectMeta: meta}
	got, _ = TrimForCache(owned)
	if m := got.(*metav1.PartialObjectMetadata); !reflect.DeepEqual(m.ObjectMeta, metav1.ObjectMeta{Namespace: "shop", Name: "order", UID: "u1", ResourceVersion: "7", OwnerReferences: meta.OwnerReferences}) {
		t.Fatalf("trimmed owned pod metadata: %+v", m.ObjectMeta)
	}
	meta.OwnerReferences[0].Controller = nil
	pm := &metav1.PartialObjectMetadata{ObjectMeta: meta}
	got, _ = TrimForCache(pm)
	if m := got.(*metav1.PartialObjectMetadata); m.ManagedFields != nil || len(m.Annotations) != 1 || len(m.OwnerReferences) != 1 {
		t.Fatalf("trimmed pod metadata: %+v", m)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"l": "v"}, ManagedFields: meta.ManagedFields, Annotations: map[string]string{LastAppliedAnnotation: "{}"}}}
	got, _ = TrimForCache(ns)
	if n := got.(*corev1.Namespace); n.ManagedFields != nil || n.Annotations != nil || n.Labels["l"] != "v" {
		t.Fatalf("trimmed namespace: %+v", n)
	}
	got, _ = TrimForCache(toolscache.DeletedFinalStateUnknown{Key: "shop/order", Obj: &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: tmpl}}})
	if dd := got.(toolscache.DeletedFinalStateUnknown).Obj.(*CachedWorkload); dd.Name != "order" {
		t.Fatalf("tombstone not trimmed: %+v", dd)
	}
	if w, ok := WorkloadOf(got); !ok || w.Key() != "Deployment/shop/order" {
		t.Fatalf("WorkloadOf(tombstone of a cached workload) = %+v, %v", w, ok)
	}
}

func mustWorkload(t *testing.T, obj any) workload.Workload {
	t.Helper()
	w, ok := WorkloadOf(obj)
	if !ok {
		t.Fatalf("%T is not a workload", obj)
	}
	return w
}

// The Namespace informer feeds the index its labels, as metadata, whole objects or tombstones.
func TestNamespaceHandler(t *testing.T) {
	x := index.New()
	h := namespaceHandler(x)
	meta := func(labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: labels}}
	}
	var changes []index.NamespaceChange
	x.OnChange(func(c index.Change) {
		if c.Namespace != nil {
			changes = append(changes, *c.Namespace)
		}
	})
	h.OnAdd(meta(map[string]string{"team": "a"}), false)
	h.OnUpdate(meta(map[string]string{"team": "a"}), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "b"}}})
	if l, ok := x.Namespace("shop"); !ok || l["team"] != "b" {
		t.Fatalf("after the update: labels %v, %v; want team=b", l, ok)
	}
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "shop", Obj: meta(nil)})
	if _, ok := x.Namespace("shop"); ok {
		t.Fatal("the deleted namespace is still in the index")
	}
	want := []index.NamespaceChange{
		{Name: "shop", New: map[string]string{"team": "a"}},
		{Name: "shop", Old: map[string]string{"team": "a"}, New: map[string]string{"team": "b"}},
		{Name: "shop", Old: map[string]string{"team": "b"}, Removed: true},
	}
	if !reflect.DeepEqual(changes, want) {
		t.Fatalf("changes = %+v\nwant %+v", changes, want)
	}
}
