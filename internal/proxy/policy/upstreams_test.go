package policy

import (
	"testing"

	"github.com/retrycap/retrycap/internal/annotations/nametest"
)

// Host matching runs per request and upstream: it allocates nothing, whatever the form.
func TestMatchHostInAllocatesNothing(t *testing.T) {
	hosts := [][]byte{
		[]byte("order"), []byte("ORDER.shop.svc.cluster.local."), []byte("order.other.svc"),
		[]byte("api.example.com"), []byte("a.b.c.d.e.f.g"), []byte(""),
	}
	names := []string{"order", "order.shop", "order.other.svc.cluster.local", "api.example.com"}
	for _, ns := range []string{"shop", ""} {
		allocs := testing.AllocsPerRun(100, func() {
			for _, h := range hosts {
				for _, n := range names {
					MatchHostIn(h, n, ns)
				}
			}
		})
		if allocs != 0 {
			t.Errorf("namespace %q: %v allocations per run, want 0", ns, allocs)
		}
	}
}

// The table of the rule, on the proxy's side (the graph's side runs it in internal/workload).
func TestMatchHostInTable(t *testing.T) {
	for _, c := range nametest.Cases() {
		ups, err := ParseUpstreams(c.Upstreams)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		matched := ""
		for _, u := range ups {
			if MatchHostIn([]byte(c.Host), u.Name, c.Namespace) {
				matched = u.Name
				break
			}
		}
		if matched != c.Match {
			t.Errorf("%s: matches %q, want %q", c, matched, c.Match)
		}
	}
}

func BenchmarkMatchHostIn(b *testing.B) {
	host := []byte("order.shop.svc.cluster.local")
	b.ReportAllocs()
	for b.Loop() {
		MatchHostIn(host, "inventory", "shop")
		MatchHostIn(host, "order", "shop")
	}
}
