package policy

import (
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/annotations"
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
		if i := MatchIn([]byte(c.Host), ups, func(u Upstream) string { return u.Name }, c.Namespace); i >= 0 {
			matched = ups[i].Name
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

// HostNode computed once and compared by NodeIs is MatchHostIn, for every row of the table and
// for every upstream of the row (not only the one that matches), in the rows' namespaces.
func TestHostNodeIsMatchHostIn(t *testing.T) {
	for _, c := range nametest.Cases() {
		if c.Namespace == "" {
			continue // without a namespace the proxy applies MatchHostIn's lenient rule itself
		}
		ups, err := ParseUpstreams(c.Upstreams)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		for _, host := range []string{c.Host, strings.ToUpper(c.Host), c.Host + "."} {
			hn := HostNode([]byte(host), c.Namespace)
			for _, u := range ups {
				want := MatchHostIn([]byte(host), u.Name, c.Namespace)
				if got := NodeIs(hn, annotations.UpstreamNode(u.Name, c.Namespace)); got != want {
					t.Errorf("%s: host %q, upstream %q: NodeIs %v, MatchHostIn %v", c, host, u.Name, got, want)
				}
			}
		}
	}
}
