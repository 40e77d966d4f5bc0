package forward

import "testing"

// Without --namespace (a VM, the lab) an upstream listed exactly as the host names it wins over
// the lenient match of a shorter one listed before it; the lenient match still serves the rest.
func TestMatchExactBeforeLenient(t *testing.T) {
	f := New(&Config{Upstreams: []UpstreamConfig{{Name: "order", Attempts: 3}, {Name: "order.other", Attempts: 1}}}, nil)
	for _, c := range []struct {
		host, want string
		attempts   int
	}{
		{"order.other", "order.other", 1},
		{"ORDER.other.", "order.other", 1},
		{"order.other.svc.cluster.local", "order.other", 1},
		{"order", "order", 3},
		{"order.shop", "order", 3}, // lenient: any namespace's order
		{"order.shop.svc.cluster.local", "order", 3},
	} {
		u := f.Match([]byte(c.host))
		if u == nil || u.Name != c.want || u.Attempts != c.attempts {
			t.Errorf("Match(%q) = %+v, want %s with %d attempts", c.host, u, c.want, c.attempts)
		}
	}
	if u := f.Match([]byte("payment")); u != nil {
		t.Errorf("Match(payment) = %+v, want none", u)
	}
}
