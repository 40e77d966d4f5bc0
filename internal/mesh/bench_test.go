package mesh

import (
	"fmt"
	"testing"
)

// BenchmarkEdge: one edge's layers in a Set of 2,000 VirtualServices and 2,000 Services.
func BenchmarkEdge(b *testing.B) {
	s := NewSet(Options{})
	if _, err := s.AddManifest([]byte(nsIstio)); err != nil {
		b.Fatal(err)
	}
	for i := range 2000 {
		if _, err := s.AddManifest([]byte(vs("bookinfo", fmt.Sprintf("s%d", i), fmt.Sprintf("  hosts: [s%d]\n  http:\n  - retries: {attempts: %d}", i, i%4)))); err != nil {
			b.Fatal(err)
		}
		if _, err := s.AddManifest([]byte(svc("bookinfo", fmt.Sprintf("s%d", i), `retry.linkerd.io/limit: "1"`))); err != nil {
			b.Fatal(err)
		}
	}
	c := caller("bookinfo")
	s.Edge(c, "s0") // build the index
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if s.Edge(c, "s1999").Tries() != 4 {
			b.Fatal("tries", i)
		}
	}
}
