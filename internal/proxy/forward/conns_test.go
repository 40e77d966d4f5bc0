package forward

import (
	"net"
	"net/netip"
	"testing"
)

// TestIsSelfAddr: the address an attempt connects to is the proxy's own
// listener when it has the listener's port on a loopback or unspecified
// address, or on the listener's own (a name resolving there through DNS is
// refused at connect).
func TestIsSelfAddr(t *testing.T) {
	f := New(&Config{}, nil)
	if f.IsSelfAddr(netip.MustParseAddr("127.0.0.1"), 15001) {
		t.Fatal("self before the listener is known")
	}
	f.Listening(&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 15001})
	for _, c := range []struct {
		ip   string
		port int
		want bool
	}{
		{"127.0.0.1", 15001, true}, {"127.0.0.53", 15001, true}, {"::1", 15001, true}, {"::ffff:127.0.0.1", 15001, true},
		{"0.0.0.0", 15001, true}, {"10.1.2.3", 15001, true}, {"10.1.2.4", 15001, false}, {"127.0.0.1", 15002, false},
	} {
		if got := f.IsSelfAddr(netip.MustParseAddr(c.ip), c.port); got != c.want {
			t.Errorf("IsSelfAddr(%s, %d) = %t, want %t", c.ip, c.port, got, c.want)
		}
	}
}
