package meshwatch

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/retrycap/retrycap/internal/mesh"
)

// benchObjects is n VirtualServices (one per Service) in 50 meshed namespaces, trimmed.
func benchObjects(n int) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i := 0; i < 50; i++ {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": fmt.Sprintf("ns-%d", i), "labels": map[string]any{"istio-injection": "enabled"}}}}
		out = append(out, ns)
	}
	for i := 0; i < n; i++ {
		out = append(out, Trim(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
			"metadata": map[string]any{"name": fmt.Sprintf("svc-%d", i), "namespace": fmt.Sprintf("ns-%d", i%50)},
			"spec": map[string]any{"hosts": []any{fmt.Sprintf("svc-%d", i)}, "http": []any{
				map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": fmt.Sprintf("svc-%d", i)}}}, "retries": map[string]any{"attempts": int64(i % 4)}},
			}},
		}}))
	}
	return out
}

// BenchmarkChange is the watcher's cost of one object change at 5000 VirtualServices: a copy of
// the Set with the object replaced, then the first query (which re-indexes), against
// rebuilding the Set from every object (what a watcher without copy-on-write snapshots would do
// to give readers a consistent Set). docs/meshes.md, "In the operator", has the figures.
func BenchmarkChange(b *testing.B) {
	objs := benchObjects(5000)
	base := mesh.NewSet(mesh.Options{})
	for _, u := range objs {
		if _, err := base.AddUnstructured(u); err != nil {
			b.Fatal(err)
		}
	}
	changed := objs[len(objs)-1]
	caller := mesh.Caller{Name: "Deployment ns-0/web", Namespace: "ns-0"}
	b.Run("copy-on-write", func(b *testing.B) {
		for b.Loop() {
			s := base.Clone()
			s.Remove(mesh.GroupIstio, "VirtualService", changed.GetNamespace(), changed.GetName())
			if _, err := s.AddUnstructured(changed); err != nil {
				b.Fatal(err)
			}
			_ = s.Edge(caller, "svc-0")
		}
	})
	b.Run("rebuild", func(b *testing.B) {
		for b.Loop() {
			s := mesh.NewSet(mesh.Options{})
			for _, u := range objs {
				if _, err := s.AddUnstructured(u); err != nil {
					b.Fatal(err)
				}
			}
			_ = s.Edge(caller, "svc-0")
		}
	})
}

// BenchmarkServiceMemory is what the watcher keeps per Service now that it reads every Service
// (their ports, #28): the trimmed object in the informer's store and its entries in the Set, in
// heap bytes per Service (cache-B/svc, set-B/svc), for a Service with one named port as
// kubectl leaves it (selector, clusterIP, last-applied-configuration, labels: all cut away).
func BenchmarkServiceMemory(b *testing.B) {
	const n = 10000
	full := func(i int) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": fmt.Sprintf("svc-%d", i), "namespace": fmt.Sprintf("ns-%d", i%50),
				"resourceVersion": fmt.Sprint(100000 + i), "uid": fmt.Sprintf("0b6f4e0c-0000-4000-8000-%012d", i),
				"labels":      map[string]any{"app": fmt.Sprintf("svc-%d", i)},
				"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`}},
			"spec": map[string]any{"selector": map[string]any{"app": fmt.Sprintf("svc-%d", i)}, "clusterIP": "10.96.0.10", "type": "ClusterIP",
				"ports": []any{map[string]any{"name": "grpc", "port": int64(7070), "targetPort": int64(7070), "protocol": "TCP"}}},
		}}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for b.Loop() {
		h0 := heap()
		kept := make([]*unstructured.Unstructured, n)
		for i := range kept {
			kept[i] = Trim(full(i))
		}
		h1 := heap()
		s := mesh.NewSet(mesh.Options{})
		for _, u := range kept {
			if _, err := s.AddUnstructured(u); err != nil {
				b.Fatal(err)
			}
		}
		h2 := heap()
		b.ReportMetric(float64(h1-h0)/n, "cache-B/svc")
		b.ReportMetric(float64(h2-h1)/n, "set-B/svc")
		runtime.KeepAlive(kept)
		runtime.KeepAlive(s)
	}
}
