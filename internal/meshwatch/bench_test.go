package meshwatch

import (
	"fmt"
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
