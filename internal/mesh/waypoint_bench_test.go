package mesh

import (
	"fmt"
	"testing"
)

// BenchmarkEdgeAmbient is BenchmarkEdge for an ambient caller into a Service behind the
// namespace's waypoint (the same 2,000 VirtualServices and Services): the waypoint's layer against
// the sidecar's, in the same run.
func BenchmarkEdgeAmbient(b *testing.B) {
	s := NewSet(Options{})
	ns := "apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo, labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}}\n"
	gw := "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: waypoint, namespace: bookinfo}\n" +
		"spec: {gatewayClassName: istio-waypoint, listeners: [{name: mesh, port: 15008, protocol: HBONE}]}\n"
	for _, doc := range []string{ns, gw} {
		if _, err := s.AddManifest([]byte(doc)); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 2000 {
		if _, err := s.AddManifest([]byte(vs("bookinfo", fmt.Sprintf("s%d", i), fmt.Sprintf("  hosts: [s%d]\n  http:\n  - retries: {attempts: %d}", i, i%4)))); err != nil {
			b.Fatal(err)
		}
		if _, err := s.AddManifest([]byte(svc("bookinfo", fmt.Sprintf("s%d", i), `retry.linkerd.io/limit: "1"`))); err != nil {
			b.Fatal(err)
		}
	}
	c := Caller{Name: "Deployment bookinfo/productpage", Namespace: "bookinfo"}
	s.Edge(c, "s0") // build the index
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if e := s.Edge(c, "s1999"); e.Tries() != 4 || e.Layers[0].Kind != IstioWaypoint {
			b.Fatal("tries", i, e.Layers)
		}
	}
}
