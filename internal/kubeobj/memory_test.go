package kubeobj

import (
	"fmt"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mapCached is CachedWorkload as it was before workload.Pairs: the pod template's labels and the
// kept annotations as Go maps (keys and values interned the same way): the anchor of
// TestCachedWorkloadHeap.
type mapCached struct {
	Kind, Namespace, Name string
	Labels, Annotations   map[string]string
}

func mapCachedOf(d *appsv1.Deployment) *mapCached {
	c := &mapCached{Kind: "Deployment", Namespace: intern(d.Namespace), Name: d.Name, Labels: map[string]string{}}
	for k, v := range d.Spec.Template.Labels {
		if v == c.Name {
			v = c.Name
		} else {
			v = intern(v)
		}
		c.Labels[intern(k)] = v
	}
	for k, v := range d.Spec.Template.Annotations {
		if KeepTemplateAnnotation(k) {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[intern(k)] = v
		}
	}
	return c
}

// scaleDeployment is a Deployment with hack/managerscale's pod-template metadata: four labels
// (one its name) and three annotations, of which retrycap keeps one.
func scaleDeployment(i int) *appsv1.Deployment {
	name := fmt.Sprintf("svc-%05d", i)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "scale-00", Name: name},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/version": "1.27.3", "team": "payments"},
			Annotations: map[string]string{"retrycap.dev/upstreams": fmt.Sprintf("svc-%05d=1, svc-%05d=2", 2*i+1, 2*i+2),
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
		}}},
	}
}

// liveHeap is the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapPerEntry is the live heap n entries made by mk hold, per entry. The Deployments they are
// made from are made first and dropped after, so that only what the entries keep counts (their
// names and upstreams are the decoded object's strings, kept by either form).
func heapPerEntry(n int, mk func(*appsv1.Deployment) any) float64 {
	ds := make([]*appsv1.Deployment, n)
	for i := range ds {
		ds[i] = scaleDeployment(i)
	}
	base := liveHeap()
	out := make([]any, n)
	for i, d := range ds {
		out[i] = mk(d)
	}
	after := liveHeap()
	runtime.KeepAlive(ds)
	runtime.KeepAlive(out)
	return float64(after-base) / float64(n)
}

// TestCachedWorkloadHeap measures what one cached workload holds on the heap, as TrimForCache
// makes it (workload.Pairs) and as the two Go maps did, for hack/managerscale's pod-template
// metadata: the compact form must hold at most half of the maps' bytes. (Measured with Go 1.26:
// 272 against 752 bytes per workload; docs/benchmarks/manager-scale.md.)
func TestCachedWorkloadHeap(t *testing.T) {
	const n = 20000
	pairs := heapPerEntry(n, func(d *appsv1.Deployment) any { c, _ := TrimForCache(d); return c })
	maps := heapPerEntry(n, func(d *appsv1.Deployment) any { return mapCachedOf(d) })
	t.Logf("heap per cached workload: %.0f bytes as workload.Pairs, %.0f as maps", pairs, maps)
	if pairs > maps/2 {
		t.Fatalf("a cached workload holds %.0f bytes as workload.Pairs, %.0f as maps: want at most half", pairs, maps)
	}
}

// TestOwnedObjectHeap measures what the cache keeps of a ReplicaSet a Deployment owns (an
// OwnedObject: a cluster holds up to revisionHistoryLimit of them per Deployment) against a
// cached Deployment of the same template in the same run: at most half of it. (Measured with Go
// 1.26: 64 against 288 bytes per object; docs/benchmarks.md.)
func TestOwnedObjectHeap(t *testing.T) {
	const n = 20000
	yes := true
	owned := heapPerEntry(n, func(d *appsv1.Deployment) any {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: "1", Controller: &yes}}},
			Spec: appsv1.ReplicaSetSpec{Template: d.Spec.Template}}
		c, _ := TrimForCache(rs)
		if _, ok := c.(*OwnedObject); !ok {
			panic(fmt.Sprintf("TrimForCache(owned ReplicaSet) = %T", c))
		}
		return c
	})
	cached := heapPerEntry(n, func(d *appsv1.Deployment) any { c, _ := TrimForCache(d); return c })
	t.Logf("heap per cached object: %.0f bytes for an owned ReplicaSet, %.0f for a Deployment", owned, cached)
	if owned > cached/2 {
		t.Fatalf("an owned ReplicaSet holds %.0f bytes in the cache, a Deployment %.0f: want at most half", owned, cached)
	}
}
