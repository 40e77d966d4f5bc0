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

// TargetOf adds port 80 to a host without one, an IPv6 literal in its
// brackets included: "[::1]" was made "[[::1]]:80", the address the
// proxy's 502 then named (its dial, fasthttp's, went to [::1]:80).
func TestTargetOfDefaultPort(t *testing.T) {
	f := New(&Config{}, nil)
	for _, c := range []struct{ hostPort, want string }{
		{"svc", "svc:80"},
		{"svc:8080", "svc:8080"},
		{"[::1]", "[::1]:80"},
		{"[::1]:8080", "[::1]:8080"},
		{"10.0.0.7", "10.0.0.7:80"},
	} {
		if got := f.TargetOf(nil, []byte(c.hostPort)); got != c.want {
			t.Errorf("TargetOf(%q) = %q, want %q", c.hostPort, got, c.want)
		}
	}
}
